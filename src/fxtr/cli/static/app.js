// fxtr viewer: plain JS, no build, no network beyond this origin (none at all when exported).
// Everything that comes from a record is put in the page with textContent, never as markup.
(function () {
  "use strict";

  var PAGE = 200, ROWS = 100;
  var embedded = document.getElementById("fxtr-data");
  var DATA = embedded ? JSON.parse(embedded.textContent) : null;

  function api(path, params) {
    if (DATA) {
      try { return Promise.resolve(fromEmbedded(path, params || {})); }
      catch (err) { return Promise.reject(err); }
    }
    var query = new URLSearchParams(params || {}).toString();
    return fetch(path + (query ? "?" + query : "")).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) { throw new Error(body.error || r.statusText); }
        return body;
      });
    });
  }

  function only(jobId) {
    if (DATA.job[jobId]) { return jobId; }
    var ids = Object.keys(DATA.job);
    if (jobId === "latest" || ids.length === 1) { return ids[0]; }
    throw new Error("job " + jobId + " is not in this export");
  }

  function fromEmbedded(path, params) {
    var m;
    if (path === "/api/jobs") { return DATA.jobs; }
    if (path === "/api/tasks") { return []; }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)$/))) { return DATA.job[only(decodeURIComponent(m[1]))]; }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)\/graph$/))) { return DATA.graph[only(decodeURIComponent(m[1]))]; }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)\/matrix$/))) { return embeddedMatrix(DATA.matrix[only(decodeURIComponent(m[1]))], params); }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)\/cell$/))) {
      var cells = "cell-" + (DATA.cell_prefix ? DATA.cell_prefix[only(decodeURIComponent(m[1]))] : "");  // a session's export: per job
      return JSON.parse(document.getElementById(cells + Number(params.index)).textContent);  // parsed only when opened
    }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)\/invocations$/))) {
      var rows = DATA.invocations[only(decodeURIComponent(m[1]))].filter(function (r) {
        var op = stripKeys(r.address);  // a workflow's node (an agent's trajectories) holds its steps
        return (!params.op || op === params.op || op.indexOf(params.op + "/") === 0) &&
               (!params.status || r.status === params.status);
      });
      var offset = Number(params.offset || 0);
      return { total: rows.length, offset: offset, items: rows.slice(offset, offset + PAGE) };
    }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)\/invocation$/))) {
      var block = DATA.index[only(decodeURIComponent(m[1]))][params.address];
      return JSON.parse(document.getElementById(block).textContent);  // parsed only when opened
    }
    throw new Error("not in this export: " + path);
  }

  // The export holds the whole matrix with each cell's flags (computed by fxtr); pages and
  // filters are cut from it here.
  function embeddedMatrix(full, params) {
    if (!full) { throw new Error("this job has no results"); }
    var show = params.show, q = (params.q || "").toLowerCase();
    var rows = full.rows.filter(function (r) {
      return (!show || r.cells.some(function (c) { return c && c[show]; })) &&
             (!q || r.label.toLowerCase().indexOf(q) >= 0);
    });
    var offset = Number(params.offset || 0);
    var out = {};
    Object.keys(full).forEach(function (k) { out[k] = full[k]; });
    out.total = rows.length; out.offset = offset; out.limit = ROWS;
    out.rows = rows.slice(offset, offset + ROWS);
    return out;
  }

  // An address without its map keys (fxtr.tracing._jobgraph.strip_keys): a quoted key is
  // JSON text, so brackets, slashes and escaped quotes inside it are text.
  function stripKeys(address) {
    var out = "", depth = 0, quoted = false, escaped = false;
    for (var i = 0; i < address.length; i++) {
      var c = address[i];
      if (quoted) {
        if (escaped) { escaped = false; } else if (c === "\\") { escaped = true; } else if (c === '"') { quoted = false; }
      }
      else if (depth && c === '"') { quoted = true; }
      else if (c === "[") { depth++; continue; }
      else if (c === "]" && depth) { depth--; continue; }
      if (!depth) { out += c; }
    }
    return out;
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") { node.textContent = attrs[k]; }
      else if (k === "onclick") { node.addEventListener("click", attrs[k]); }
      else { node.setAttribute(k, attrs[k]); }
    });
    (children || []).forEach(function (c) { if (c) { node.appendChild(c); } });
    return node;
  }
  function svg(tag, attrs, text) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }
  function usd(v) { return v === null || v === undefined ? "-" : "$" + (v >= 0.01 || v === 0 ? v.toFixed(4) : v.toFixed(6)); }
  // dollars of invocations of which `unpriced` made calls with no price (as fxtr.report.format_cost)
  function cost(v, unpriced) { if (unpriced && !v) { return "n/a"; } return (v === null || v === undefined ? "n/a" : usd(v)) + (unpriced ? " + n/a" : ""); }
  function main() { return document.getElementById("main"); }
  function show(nodes) { var m = main(); m.textContent = ""; nodes.forEach(function (n) { if (n) { m.appendChild(n); } }); }
  function fail(err) { show([el("p", { class: "notice", text: "Error: " + err.message })]); }

  // every figure as fxtr.report._evals.format_score prints it: three decimals (0.750)
  function num(v) {
    if (v === null || v === undefined || typeof v !== "number" || isNaN(v)) { return "-"; }
    var t = v.toFixed(3);
    return t === "-0.000" ? "0.000" : t;
  }
  function signed(v) { var t = num(v); return (t !== "-" && t !== "0.000" && t.charAt(0) !== "-") ? "+" + t : t; }
  function interval(low, high) { return num(low) === "-" || num(high) === "-" ? "-" : "[" + num(low) + ", " + num(high) + "]"; }
  function label(key) {
    var dims = Object.keys(key || {});
    if (!dims.length) { return "all"; }
    if (dims.length === 1) { return String(key[dims[0]]); }
    return dims.map(function (d) { return d + "=" + key[d]; }).join(", ");
  }
  function go(hash) { location.hash = hash; }
  function jobLink(id) { return "#/job/" + encodeURIComponent(id); }
  function gateBadge(gate) {
    if (!gate) { return null; }
    var cls = gate === "gate passed" ? "badge ok" : "badge bad";
    return el("span", { class: cls + " gate", text: gate });
  }

  // jobs page ------------------------------------------------------------------------
  function jobsPage() {
    api("/api/jobs").then(function (jobs) {
      var status = el("select", { id: "filter-status" }, ["", "succeeded", "failed", "needs_review", "error", "running", "interrupted", "damaged"].map(function (s) {
        return el("option", { value: s, text: s || "any status" });
      }));
      var workflow = el("input", { id: "filter-workflow", placeholder: "workflow or eval" });
      var picked = [];
      var compare = el("button", { id: "compare-picked", type: "button", text: "compare the two checked jobs", disabled: "disabled",
        onclick: function () { if (picked.length === 2) { go("#/compare/" + encodeURIComponent(picked[0]) + "/" + encodeURIComponent(picked[1])); } } });
      var body = el("tbody");
      var columns = ["", "job", "eval / workflow", "status", "gate", "attempts", "ran", "cached", "failed", "tokens", "cost", "started", "commit"];
      var numeric = ["attempts", "ran", "cached", "failed", "tokens", "cost"];
      var table = el("table", { id: "jobs" }, [el("thead", {}, [el("tr", {}, columns.map(function (c) {
        return el("th", { text: c, class: numeric.indexOf(c) >= 0 ? "num" : "" });
      }))]), body]);
      function pick(id, box) {
        picked = picked.filter(function (p) { return p !== id; });
        if (box.checked) { picked.push(id); }
        if (picked.length > 2) { picked.shift(); }
        Array.prototype.forEach.call(body.querySelectorAll("input.pick"), function (b) { b.checked = picked.indexOf(b.getAttribute("data-job")) >= 0; });
        if (picked.length === 2) { compare.removeAttribute("disabled"); } else { compare.setAttribute("disabled", "disabled"); }
      }
      function render() {
        body.textContent = "";
        var needle = workflow.value.toLowerCase();
        var shown = jobs.filter(function (j) {
          return (!status.value || j.status === status.value) &&
                 (!needle || ((j.workflow || "") + " " + (j.eval || "")).toLowerCase().indexOf(needle) >= 0);
        }).slice(0, PAGE);
        shown.forEach(function (j) {
          var open = function () { go(jobLink(j.job_id)); };
          var box = el("input", { type: "checkbox", class: "pick", "data-job": j.job_id, title: "pick for a comparison" });
          box.addEventListener("click", function (ev) { ev.stopPropagation(); pick(j.job_id, box); });
          if (j.status === "damaged") {
            body.appendChild(el("tr", { class: "damaged", "data-job": j.job_id }, [el("td"), el("td", { text: j.job_id }),
              el("td", { text: j.workflow || "" }), el("td", { text: "damaged", class: "status-failed" }),
              el("td", { colspan: "9", class: "muted", text: j.error || "" })]));
            return;
          }
          body.appendChild(el("tr", { class: "row" + (j.gate === "gate failed" || j.gate === "regressed" ? " gate-failed" : ""), "data-job": j.job_id, onclick: open }, [
            el("td", {}, [box]),
            el("td", { text: j.job_id, class: "mono" }),
            el("td", { class: "job-name" }, [el("div", { class: "eval-name", text: j.eval || j.workflow || "" }), j.eval ? el("div", { class: "muted small", text: j.workflow || "" }) : null]),
            el("td", { text: j.status, class: "status-" + j.status }),
            el("td", {}, [gateBadge(j.gate)]),
            el("td", { text: String(j.attempts), class: "num" }), el("td", { text: String(j.ran), class: "num" }),
            el("td", { text: String(j.cached), class: "num" }), el("td", { text: String(j.failed), class: "num" }),
            el("td", { text: String(j.tokens), class: "num" }), el("td", { text: j.cost_usd === null || j.cost_usd === undefined ? "n/a" : usd(j.cost_usd), class: "num" }),
            el("td", { text: j.started || "" }), el("td", { text: j.commit || "" })
          ]));
        });
      }
      status.addEventListener("change", render);
      workflow.addEventListener("input", render);
      render();
      show([el("h1", { text: "Jobs" }), el("div", { class: "filters" }, [status, workflow, compare]), el("div", { class: "scroll" }, [table]),
            jobs.length >= PAGE ? el("p", { class: "muted", text: "the newest " + PAGE + " jobs; `fxtr jobs --limit 0` lists every one" }) : null]);
    }).catch(fail);
  }

  // job page -------------------------------------------------------------------------
  function jobPage(ref, options) {
    options = options || {};
    // the head brings the first page of results with it: the first screen in one request
    var params = { matrix: "1" };
    if (options.compare) { params.compare = options.compare; }
    if (options.show) { params.show = options.show; }
    api("/api/jobs/" + encodeURIComponent(ref), params).then(function (job) {
      var jobId = job.job_id, ev = job.evaluation, rec = job.record;
      var title = ev ? (ev.eval || ev.workflow) : rec.workflow;
      var head = el("div", { class: "job-head" }, [
        el("h1", {}, [el("span", { text: title }), el("span", { class: "muted mono", text: " · " + jobId })]),
        el("p", {}, [el("span", { text: job.status, class: "status-" + job.status }), gateBadge(job.gate),
          el("span", { class: "muted", id: "job-facts", text: " · " + (ev ? rec.workflow + " · " : "") + "attempt " + (rec.attempts || []).length +
            (rec.commit ? " · commit " + rec.commit.slice(0, 10) + (rec.dirty ? "*" : "") : "") })])
      ]);
      var graphSection = el("section", { id: "graph-section" }, [el("h2", { text: "Operations" }), el("p", { class: "muted", text: "loading the operation graph…" })]);
      if (!ev) {
        show([head, graphSection]);
        loadGraph(jobId, graphSection, true);
        return;
      }
      var results = el("section", { id: "results" });
      if (ev.baseline && ev.baseline.source === "store" && ev.baseline.job_id) {
        head.appendChild(el("p", {}, [el("span", { class: "muted", text: "baseline " }),
          el("a", { href: "#/compare/" + encodeURIComponent(ev.baseline.job_id) + "/" + encodeURIComponent(jobId), id: "to-compare", text: "compare with " + ev.baseline.job_id })]));
      }
      show([head, groupsTable(ev), judgeSection(ev), results, graphSection]);
      var page = job.matrix || null;
      var state = { compare: page ? page.compare : options.compare || null, show: options.show || null, offset: 0, q: "" };
      matrixView(jobId, results, state, page).then(function () { loadGraph(jobId, graphSection, false); });
    }).catch(fail);
  }

  function groupsTable(ev) {
    if (!ev.groups || !ev.groups.length) { return null; }
    var dims = (ev.group_dims || []).join(", ") || "group";
    var rows = ev.groups.map(function (g) {
      var ci = (g.low !== undefined && g.low !== null) ? interval(g.low, g.high) + (g.interval ? " " + g.interval : "") : "-";
      var passed = g.threshold === null || g.threshold === undefined ? "no gate" : (g.passed ? "passed" : "failed");
      var b = g.baseline || null;
      return el("tr", { class: g.passed === false ? "group failed" : "group" }, [
        el("td", { text: label(g.group) }), el("td", { class: "num", text: num(g.mean) }), el("td", { text: ci }),
        el("td", { class: "num", text: g.n === undefined ? "-" : String(g.n) }), el("td", { class: "num", text: g.missing ? String(g.missing) : "0" }),
        el("td", { class: "num", text: num(g.threshold) }),
        el("td", { class: passed === "failed" ? "status-failed" : passed === "passed" ? "status-succeeded" : "muted", text: passed }),
        el("td", { text: b ? signed(b.delta) + " (" + (b.verdict || "") + ")" : "" })
      ]);
    });
    var gate = ev.gate || {};
    var notes = [];
    (gate.failed || []).forEach(function (f) { notes.push(el("li", { text: "gate failed: " + (typeof f === "string" ? f : label(f)) })); });
    (gate.regressed || []).forEach(function (f) { notes.push(el("li", { text: "regressed: " + (typeof f === "string" ? f : label(f)) })); });
    return el("section", { id: "groups" }, [el("h2", { text: "Scores by " + dims }),
      el("table", { class: "groups" }, [el("thead", {}, [el("tr", {}, [dims, "mean", "interval", "n", "missing", "threshold", "gate", "vs baseline"].map(function (c, i) {
        return el("th", { text: c, class: [1, 3, 4, 5].indexOf(i) >= 0 ? "num" : "" });
      }))]), el("tbody", {}, rows)]),
      notes.length ? el("ul", { class: "gate-notes" }, notes) : null]);
  }

  // a judged eval's audit (DESIGN 15): raw beside corrected, q0/q1, flips, position bias
  function judgeSection(ev) {
    var judged = (ev.groups || []).filter(function (g) { return g.judge; });
    if (!judged.length) { return null; }
    var rate = function (r) { return r ? num(r.value) + " [" + num(r.low) + ", " + num(r.high) + "] n=" + r.n : "-"; };
    var rows = judged.map(function (g) {
      var j = g.judge, c = g.corrected;
      var corrected = c ? num(c.value) + " [" + num(c.low) + ", " + num(c.high) + "]" : (j.usable === false ? "unusable judge" : "-");
      return el("tr", { class: j.usable === false ? "group failed" : "group" }, [
        el("td", { text: label(g.group) }), el("td", { class: "num", text: num(g.mean) }), el("td", { class: "corrected", text: corrected }),
        el("td", { text: rate(j.q0) }), el("td", { text: rate(j.q1) }),
        el("td", { class: "num", text: j.flip_rate === null || j.flip_rate === undefined ? "-" : num(j.flip_rate) }),
        el("td", { class: "num", text: j.position_inconsistency === null || j.position_inconsistency === undefined ? "-" : num(j.position_inconsistency) })
      ]);
    });
    var first = judged[0].judge;
    var notes = [];
    if (first.usable === false) {
      notes.push(el("li", { text: "judge " + (first.judges || []).join(", ") + " is unusable (not clearly better than chance: the Wilson lower bounds of q0 and q1 sum to 1 or less, or a gold label is missing): its groups are gated on the raw mean" }));
    }
    if (first.wrong && first.wrong.length) {
      notes.push(el("li", { text: "gold cases the judge got wrong: " + first.wrong.join(", ") }));
    }
    var dims = (ev.group_dims || []).join(", ") || "group";
    return el("section", { id: "judge" }, [el("h2", { text: "Judge " + (first.judges || []).join(", ") }),
      el("table", { class: "groups" }, [el("thead", {}, [el("tr", {}, [dims, "raw mean", "corrected", "q0 (specificity)", "q1 (sensitivity)", "flip rate", "position inconsistency"].map(function (h) {
        return el("th", { text: h });
      }))]), el("tbody", {}, rows)]),
      el("p", { class: "muted small", text: "Corrected: the pass rate a perfect judge would give, from the judge's q0 and q1 on its gold set (Rogan-Gladen, 95% interval); the gate uses it. Flip rate: answers whose repeated verdicts disagree. Position inconsistency: pairs whose verdict changes with the order." }),
      notes.length ? el("ul", { class: "gate-notes" }, notes) : null]);
  }

  // the results matrix ---------------------------------------------------------------
  function bucket(cell, range) {
    if (!cell || cell.missing || cell.score === null) { return "sc-none"; }
    var lo = range[0], hi = range[1];
    var f = hi > lo ? (cell.score - lo) / (hi - lo) : (cell.score >= hi ? 1 : 0);
    return "sc-" + Math.max(0, Math.min(10, Math.round(f * 10)));
  }

  function scoreRange(page) {
    if (page.binary) { return [0, 1]; }
    var lo = Infinity, hi = -Infinity;
    page.rows.forEach(function (r) { r.cells.forEach(function (c) { if (c && c.score !== null && !c.missing) { lo = Math.min(lo, c.score); hi = Math.max(hi, c.score); } }); });
    if (lo >= 0 && hi <= 1) { return [0, 1]; }
    return lo === Infinity ? [0, 1] : [lo, hi];
  }

  function matrixView(jobId, box, state, loaded) {
    var top = function () { if (box.getBoundingClientRect().top < 0) { box.scrollIntoView(); } };
    var params = { offset: state.offset };
    if (state.show) { params.show = state.show; }
    if (state.q) { params.q = state.q; }
    if (state.compare) { params.compare = state.compare; }
    var request = loaded ? Promise.resolve(loaded) : api("/api/jobs/" + encodeURIComponent(jobId) + "/matrix", params);
    return request.then(function (page) {
      box.textContent = "";
      var rerun = function (change) {
        var next = {}; Object.keys(state).forEach(function (k) { next[k] = state[k]; });
        Object.keys(change).forEach(function (k) { next[k] = change[k]; });
        if (!("offset" in change)) { next.offset = 0; }
        return matrixView(jobId, box, next);
      };
      var filters = [["", "all", page.counts.cases]].concat(["failed", "flaky", "missing", "changed"].filter(function (f) {
        return f !== "changed" || page.comparison;
      }).map(function (f) { return [f, f, page.counts[f]]; }));
      var bar = el("div", { class: "filters", id: "matrix-filters" }, filters.map(function (f) {
        return el("button", { type: "button", class: "filter" + ((state.show || "") === f[0] ? " active" : ""), "data-filter": f[0] || "all",
          text: f[1] + " (" + f[2] + ")", onclick: function () { rerun({ show: f[0] || null }); } });
      }));
      var search = el("input", { id: "matrix-search", placeholder: "find a case", value: state.q || "" });
      search.addEventListener("keydown", function (e) { if (e.key === "Enter") { rerun({ q: search.value }); } });
      bar.appendChild(search);
      if (page.comparison) {
        bar.appendChild(el("span", { class: "muted", text: "compared with " }));
        bar.appendChild(el("a", { href: jobLink(page.compare), class: "mono", text: page.compare }));
        bar.appendChild(el("button", { type: "button", text: "hide comparison", onclick: function () { rerun({ compare: null, show: state.show === "changed" ? null : state.show }); } }));
      }
      var range = scoreRange(page);
      var head = el("tr", {}, [el("th", { class: "case-head", text: (page.case_dims || []).join(", ") || "case" })].concat(page.columns.map(function (c) {
        var stats = c.stats;
        return el("th", { class: "col-head", title: label(c.group) }, [el("div", { text: c.label }),
          stats ? el("div", { class: "muted small", text: "mean " + num(stats.mean) + (stats.corrected ? " · corrected " + num(stats.corrected.value) : "") + (stats.passed === false ? " · failed" : "") }) : null]);
      })));
      var body = el("tbody");
      page.rows.forEach(function (r) {
        var tr = el("tr", { "data-case": r.label }, [el("th", { class: "case", text: r.label, title: label(r.case) })]);
        r.cells.forEach(function (c, i) {
          if (!c) { tr.appendChild(el("td", { class: "cell sc-none", text: "" })); return; }
          var cls = "cell " + bucket(c, range) + (c.missing ? " missing" : "") + (c.unscored ? " unscored" : "") + (c.flaky ? " flaky" : "") + (c.failed ? " failed" : "") + (c.changed ? " changed" : "");
          var td = el("td", { class: cls, "data-index": String(c.index), "data-col": page.columns[i].label, tabindex: "0",
            title: c.missing ? "missing: " + c.recorded + " of " + c.samples + " sample(s) recorded" : c.unscored ? "a result that is not a score: the test judged it" + (c.outcome ? " (" + c.outcome + ")" : "") : (c.verdict ? c.verdict.replace("_", " ") : "score " + num(c.score)) },
            [el("span", { class: "score", text: c.missing ? (c.recorded ? c.text + " · missing" : "missing") : c.text }),
             c.changed ? el("span", { class: "was", text: "was " + (c.baseline === null || c.baseline === undefined ? "absent" : c.baseline) }) : null]);
          var open = function () { openCell(jobId, c.index, td); };
          td.addEventListener("click", open);
          td.addEventListener("keydown", function (e) { if (e.key === "Enter") { open(); } });
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      var table = el("table", { class: "matrix", id: "matrix" }, [el("thead", {}, [head]), body]);
      var end = Math.min(page.offset + page.rows.length, page.total);
      var pager = el("div", { class: "pager" }, [
        page.offset > 0 ? el("button", { type: "button", text: "previous", onclick: function () { rerun({ offset: Math.max(0, page.offset - ROWS) }).then(top); } }) : null,
        el("span", { class: "muted", id: "matrix-range", text: (page.total ? page.offset + 1 : 0) + "–" + end + " of " + page.total + " case(s)" }),
        end < page.total ? el("button", { type: "button", text: "next", onclick: function () { rerun({ offset: page.offset + ROWS }).then(top); } }) : null
      ]);
      var legend = el("p", { class: "muted small", text: (page.binary ? "Cells: samples passed of samples recorded (k/n), coloured from none (red) to all (green); ~ flaky." :
        "Cells: the mean score over samples, coloured from low (red) to high (green).") + " Striped: missing (failed, skipped or in review)." +
        (page.comparison ? " Outlined: changed since the comparison job (was …)." : "") + " Failed: below the gate's threshold (or 0.5). Click a cell for its invocations and conversations." });
      var dims = (page.group_dims || []).join(", ") || "group";
      box.appendChild(el("h2", { text: "Results: " + page.counts.cases + (page.counts.cases === 1 ? " case" : " cases") + " × " + page.columns.length + " " + (page.columns.length === 1 ? dims : dims + (page.group_dims.length > 1 ? " combinations" : "s")) }));
      [bar, legend, el("div", { class: "scroll" }, [table]), page.rows.length ? null : el("p", { class: "muted", text: "No case matches." }), pager].forEach(function (n) { if (n) { box.appendChild(n); } });
    }).catch(function (err) { box.textContent = ""; box.appendChild(el("p", { class: "notice", text: "Error: " + err.message })); });
  }

  // a cell's panel: its invocations and their model calls ----------------------------
  function openCell(jobId, index, td) {
    api("/api/jobs/" + encodeURIComponent(jobId) + "/cell", { index: index }).then(function (d) {
      Array.prototype.forEach.call(document.querySelectorAll("td.cell.selected"), function (s) { s.classList.remove("selected"); });
      if (td) { td.classList.add("selected"); }
      var panel = document.getElementById("panel");
      panel.hidden = false;
      panel.textContent = "";
      panel.setAttribute("data-cell", String(index));
      panel.removeAttribute("data-address");
      var s = d.score || {};
      var parts = [el("button", { class: "close", type: "button", text: "close", onclick: function () { panel.hidden = true; } }),
        el("h2", { text: label(d.case) + (Object.keys(d.group || {}).length ? " · " + label(d.group) : "") }),
        el("dl", { class: "kv" }, [el("dt", { text: "score" }), el("dd", { text: (s.text || "-") + (s.verdict ? " (" + s.verdict.replace("_", " ") + ")" : "") }),
          el("dt", { text: d.sample_dim ? "per " + d.sample_dim : "values" }), el("dd", { class: "mono", text: s.unscored ? (s.outcome ? "no score: the test " + s.outcome + " on its result" : "no score (a result the test judged)") : d.values.map(function (v) { return v === null ? "missing" : num(v); }).join("  ") }),
          el("dt", { text: "status" }), el("dd", { text: d.status || "" })])];
      caseInputs(d.case_inputs).forEach(function (n) { parts.push(n); });
      if (!d.invocations.length) { parts.push(el("p", { class: "muted", text: "No invocations are recorded for this cell." })); }
      var steps = null;  // an agent eval: its trajectories (agents.js) first, the steps folded below
      if (d.trajectories && d.trajectories.length && window.fxtrAgents) {
        parts = parts.concat(window.fxtrAgents.render(d.trajectories, el));
        steps = el("details", { class: "agent-steps" }, [el("summary", { text: "step invocations (" + d.invocations.length + ")" })]);
      }
      var lastSample = null;
      d.invocations.forEach(function (inv) {
        if (inv.sample !== null && inv.sample !== undefined && inv.sample !== lastSample) {
          lastSample = inv.sample;
          (steps || { appendChild: function (n) { parts.push(n); } }).appendChild(el("h3", { class: "sample-head", text: d.sample_dim + " " + inv.sample }));
        }
        var box = el("div", { class: "cell-invocation", "data-address": inv.address }, [
          el("h3", {}, [el("span", { text: inv.step || inv.address }), el("span", { class: "status-" + inv.status, text: " " + inv.status + (inv.from_cache ? " · cached" : "") })]),
          el("div", { class: "muted small mono", text: inv.address })]);
        if (inv.error) { box.appendChild(el("pre", { class: "error", text: (inv.reason ? inv.reason + ": " : "") + inv.error })); }
        if (inv.calls_from && (inv.model_calls || []).length) {
          box.appendChild(el("p", { class: "muted small calls-from", text: "cached: the conversation of job " + inv.calls_from + ", which ran it" }));
        }
        (inv.model_calls || []).forEach(function (c) { box.appendChild(transcript(c)); });
        if (inv.result !== undefined && inv.result !== null) {
          if ((inv.model_calls || []).length) {  // the conversation above says it; the record on demand
            box.appendChild(el("details", { class: "result-line" }, [el("summary", { class: "muted", text: "result" }), value(inv.result)]));
          } else {
            box.appendChild(el("div", { class: "result-line" }, [el("span", { class: "muted", text: "result " }), value(inv.result)]));
          }
        }
        box.appendChild(el("button", { type: "button", class: "link", text: "details", onclick: function () { openPanel(jobId, inv.address); } }));
        if (steps) { steps.appendChild(box); } else { parts.push(box); }
      });
      if (steps) { parts.push(steps); }
      parts.forEach(function (p) { panel.appendChild(p); });
    }).catch(fail);
  }

  // the case's own values (a kit Case: its input and target), from the job's inputs
  function caseInputs(inputs) {
    var out = [];
    Object.keys(inputs || {}).forEach(function (name) {
      var v = inputs[name];
      var entity = v && v.kind === "ref" ? v.entity : v;
      if (entity && entity.kind === "entity") {
        var rows = [];
        ["input", "target", "choices"].forEach(function (f) {
          var x = entity.fields[f];
          if (x === undefined || x === null || (Array.isArray(x) && !x.length)) { return; }
          rows.push(el("dt", { text: f }));
          rows.push(el("dd", { class: "case-" + f }, [typeof x === "string" ? el("pre", { text: x }) : value(x)]));
        });
        out.push(el("section", { class: "case-inputs", "data-input": name }, [el("h3", { text: name }), el("dl", { class: "kv" }, rows)]));
      } else {
        out.push(el("section", { class: "case-inputs", "data-input": name }, [el("h3", { text: name }), value(v)]));
      }
    });
    return out;
  }

  function transcript(c) {
    var role = c.role || "subject";
    var cached = c.cached_input_tokens ? " (" + c.cached_input_tokens + " cached)" : "";
    var box = el("div", { class: "transcript role-" + role, "data-role": role }, [el("div", { class: "call-head" }, [
      el("strong", { text: (role === "judge" ? "judge · " : "") + (c.model || "model") }),
      el("span", { class: "muted usage", text: " " + (c.status || "") + " · " + (c.input_tokens || 0) + " in" + cached + " / " + (c.output_tokens || 0) + " out tok · " +
        (c.cost_usd === null || c.cost_usd === undefined ? "n/a" : usd(c.cost_usd)) })])]);
    if (c.messages && c.messages.length) {
      c.messages.forEach(function (m) {
        box.appendChild(el("div", { class: "msg msg-" + m.role }, [el("div", { class: "who", text: m.role }), el("pre", { text: textOf(m.content) })]));
      });
    } else {
      box.appendChild(el("p", { class: "muted small", text: "The messages of this call were not recorded." }));
    }
    if (textOf(c.reply)) {
      box.appendChild(el("div", { class: "msg msg-reply" }, [el("div", { class: "who", text: "reply" }), el("pre", { class: "reply", text: textOf(c.reply) })]));
    } else if (c.reply !== undefined && c.reply !== null && !c.error) {  // never an empty box
      box.appendChild(el("p", { class: "muted small reply-empty", text: "The reply has no text (a reply of tool calls: the trajectory shows them)." }));
    }
    if (c.error) {
      box.appendChild(el("pre", { class: "error", text: (c.reason ? c.reason + ": " : "") + c.error }));
    }
    return box;
  }
  function textOf(v) {
    if (v === null || v === undefined) { return ""; }
    if (typeof v === "string") { return v; }
    if (v.kind === "text") { return v.text + "\n… " + v.omitted + " more characters"; }
    return JSON.stringify(v);
  }

  // comparison page ------------------------------------------------------------------
  function comparePage(a, b) {
    api("/api/compare/" + encodeURIComponent(a) + "/" + encodeURIComponent(b)).then(function (cmp) {
      var aId = cmp.a.job_id, bId = cmp.b.job_id;
      var ev = cmp.b.evaluation || {};
      var dims = (ev.group_dims || []).join(", ") || "group";
      var rows = cmp.groups.map(function (g) {
        var ci = interval(g.low, g.high);
        var verdict = g.verdict || "-";
        return el("tr", { class: "verdict-" + verdict.replace(/ /g, "-"), "data-group": g.label }, [
          el("td", { text: g.label }), el("td", { class: "num", text: num(g.baseline_mean) }), el("td", { class: "num", text: num(g.run_mean) }),
          el("td", { class: "num", text: signed(g.delta) }), el("td", { text: ci }),
          el("td", { class: "num", text: g.n_paired === undefined ? "-" : String(g.n_paired) }),
          el("td", { class: "num", text: g.flipped.to_fail.length + " ↓ · " + g.flipped.to_pass.length + " ↑" }),
          el("td", { class: "num", text: num(g.mde) }), el("td", { class: "verdict", text: verdict })
        ]);
      });
      var table = el("table", { class: "groups", id: "comparison" }, [el("thead", {}, [el("tr", {}, [dims, "A mean", "B mean", "delta", "interval", "n paired", "flipped", "MDE", "verdict"].map(function (c) { return el("th", { text: c }); }))]), el("tbody", {}, rows)]);
      var flips = el("section", { id: "flipped" }, [el("h2", { text: "Flipped cases" })]);
      var any = false;
      cmp.groups.forEach(function (g) {
        [["pass → fail", g.flipped.to_fail, "to-fail"], ["fail → pass", g.flipped.to_pass, "to-pass"]].forEach(function (f) {
          if (!f[1].length) { return; }
          any = true;
          flips.appendChild(el("div", { class: "flip " + f[2] }, [el("strong", { text: g.label + ": " + f[0] + " (" + f[1].length + ")" }),
            el("ul", {}, f[1].slice(0, 200).map(function (c) { return el("li", { text: c }); }))]));
        });
        var only = [];
        if (g.only_in_baseline) { only.push(count(g.only_in_baseline) + " only in A"); }
        if (g.only_in_run) { only.push(count(g.only_in_run) + " only in B"); }
        if (only.length) { flips.appendChild(el("p", { class: "muted", text: g.label + ": " + only.join(", ") + " (not paired)" })); }
      });
      if (!any) { flips.appendChild(el("p", { class: "muted", text: "No case flipped." })); }
      var results = el("section", { id: "results" });
      show([el("h1", { text: "B against A" + (ev.eval ? " · " + ev.eval : "") }),
        el("p", {}, [el("span", { text: "A (baseline) " }), el("a", { href: jobLink(aId), class: "mono", text: aId }), gateBadge(cmp.a.gate),
          el("span", { text: "  ·  B " }), el("a", { href: jobLink(bId), class: "mono", text: bId }), gateBadge(cmp.b.gate)]),
        el("p", { class: "muted small", text: "Cases paired by key; delta = B − A with its " + "interval; regressed when the whole interval lies below " + (cmp.margin ? "−" + num(cmp.margin) : "0") + ", improved when above 0. MDE: the smallest difference these paired cases detect at 80% power." }),
        el("div", { class: "scroll" }, [table]), flips, results]);
      matrixView(bId, results, { compare: aId, show: "changed", offset: 0, q: "" });
    }).catch(fail);
  }
  function count(v) { return Array.isArray(v) ? v.length : (typeof v === "object" && v ? Object.keys(v).length : v); }

  // operation graph ------------------------------------------------------------------
  function loadGraph(jobId, section, lead) {
    return api("/api/jobs/" + encodeURIComponent(jobId) + "/graph").then(function (data) {
      var row = data.row, graph = data.graph;
      section.textContent = "";
      var facts = document.getElementById("job-facts");
      if (facts) {
        facts.textContent = facts.textContent + " · " + row.ran + " ran, " + row.cached + " cached, " + row.failed + " failed · " + row.tokens + " tokens · " + cost(row.cost_usd, 0);
      }
      var list = el("div", { id: "invocations" });
      section.appendChild(el("h2", { text: "Operations" }));
      if (graph.truncated) {
        section.appendChild(el("p", { class: "notice", text: "This job has " + graph.nodes.length + " operations, too many to draw; shown as a tree." }));
        section.appendChild(tree(graph, jobId, list));
      } else {
        var drawing = draw(graph, jobId, list);
        section.appendChild(el("div", { class: "scroll graph-box" }, [drawing]));
        fitDrawn(drawing);
      }
      section.appendChild(list);
      var failed = graph.nodes.filter(function (n) { return (n.counts.failed || 0) > 0; })[0];
      if (lead || failed) { listInvocations(jobId, failed ? failed.id : null, list, 0, failed ? "failed" : null); }
    }).catch(function (err) { section.textContent = ""; section.appendChild(el("p", { class: "notice", text: "Error: " + err.message })); });
  }

  function nodeLines(n) {
    if (n.lines) { return n.lines; }  // a node that says itself (an agent's trajectories)
    var c = n.counts, parts = [];
    ["succeeded", "failed", "skipped", "needs_review", "running"].forEach(function (s) { if (c[s]) { parts.push(c[s] + " " + (s === "succeeded" ? "ok" : s.replace("_", " "))); } });
    var lines = [parts.join(" · ") || "no invocations"];
    if (n.kind === "step" && n.invocations) {
      lines.push(n.ran + " ran · " + n.cached + " cached");
      if (n.input_tokens + n.output_tokens) { lines.push((n.input_tokens + n.output_tokens) + " tokens · " + cost(n.cost_usd, n.unpriced)); }
    }
    return lines;
  }

  // Labels are cut to what fits a node (the full text is the node's tooltip): a name wraps onto
  // a second line, then ends in an ellipsis.
  // The first cut is by an estimate of the characters' width; fitDrawn() then measures the
  // drawn text and shortens what still overflows.
  var W = 210, CHAR = 6.2, NAME_CHAR = 7.0;
  function fit(text, width, charWidth) {
    var max = Math.floor(width / (charWidth || CHAR));
    return text.length <= max ? text : text.slice(0, Math.max(1, max - 1)) + "…";
  }
  function fitDrawn(root) {
    Array.prototype.forEach.call(root.querySelectorAll("text[data-fit]"), function (t) {
      var max = Number(t.getAttribute("data-fit")), text = t.textContent;
      if (t.getComputedTextLength() <= max) { return; }
      var lo = 1, hi = text.length;
      while (lo < hi) {  // the longest prefix that fits with its ellipsis
        var mid = Math.ceil((lo + hi) / 2);
        t.textContent = text.slice(0, mid).replace(/…$/, "") + "…";
        if (t.getComputedTextLength() <= max) { lo = mid; } else { hi = mid - 1; }
      }
      t.textContent = text.slice(0, lo).replace(/…$/, "") + "…";
    });
  }
  function wrap(text, width, charWidth) {
    var max = Math.floor(width / (charWidth || CHAR));
    if (text.length <= max) { return [text]; }
    // break at the last separator that leaves a third of the line or more: " (", "/", "::", "."
    var cut = -1;
    [" (", "/", "::", ".", "_", "-"].some(function (sep) {
      var at = text.lastIndexOf(sep, max - sep.length);
      if (at >= max / 3) { cut = sep === " (" ? at + 1 : at + sep.length; return true; }
      return false;
    });
    if (cut < 0) { cut = max; }
    return [text.slice(0, cut).trim(), fit(text.slice(cut), width, charWidth)];
  }

  function draw(graph, jobId, list) {
    var H = 104;
    var width = 40 + Math.max.apply(null, graph.nodes.map(function (n) { return n.x + W; }).concat([300]));
    var height = 40 + Math.max.apply(null, graph.nodes.map(function (n) { return n.y + H; }).concat([120]));
    var root = svg("svg", { class: "graph", width: width, height: height, viewBox: "0 0 " + width + " " + height });
    var at = {};
    graph.nodes.forEach(function (n) { at[n.id] = n; });
    graph.edges.forEach(function (e) {
      var a = at[e.source], b = at[e.target];
      if (!a || !b) { return; }
      var x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      root.appendChild(svg("path", { class: "edge", d: "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + x2 + "," + y2 }));
      root.appendChild(svg("text", { class: "param", x: x2 - 4, y: y2 - 5, "text-anchor": "end" }, fit(e.param, 62)));
    });
    graph.nodes.forEach(function (n) {
      var failed = (n.counts.failed || 0) > 0;
      var g = svg("g", { class: "node kind-" + n.kind + (failed ? " failed" : ""), "data-op": n.id, transform: "translate(" + n.x + "," + n.y + ")" });
      var name = n.name + (n.callee && n.callee !== n.name ? " (" + n.callee + ")" : "");
      g.appendChild(svg("title", {}, n.id + (n.callee ? " · " + n.callee : "") + "\n" + nodeLines(n).join("\n")));
      g.appendChild(svg("rect", { width: W, height: H }));
      if (failed) { g.appendChild(svg("rect", { class: "fail-bar", width: 5, height: H })); }
      var lines = wrap(name, W - 16, NAME_CHAR);
      lines.forEach(function (line, i) { g.appendChild(svg("text", { class: "name", x: 10, y: 17 + 14 * i, "data-fit": W - 16 }, line)); });
      var y = 17 + 14 * lines.length + 2;
      nodeLines(n).forEach(function (line, i) { g.appendChild(svg("text", { class: "sub", x: 10, y: y + 14 * i, "data-fit": W - 16 }, fit(line, W - 16))); });
      var reasons = Object.keys(n.reasons || {});
      if (reasons.length) { g.appendChild(svg("text", { class: "reason", x: 10, y: H - 7, "data-fit": W - 16 }, fit("reason: " + reasons.join(", "), W - 16))); }
      g.addEventListener("click", function () {
        Array.prototype.forEach.call(root.querySelectorAll(".node.selected"), function (s) { s.classList.remove("selected"); });
        g.classList.add("selected");
        listInvocations(jobId, n.id, list, 0, null);
      });
      root.appendChild(g);
    });
    return root;
  }

  function tree(graph, jobId, list) {
    var ul = el("ul", { class: "tree" });
    graph.nodes.forEach(function (n) {
      ul.appendChild(el("li", { "data-op": n.id }, [el("button", { type: "button", text: n.id, onclick: function () { listInvocations(jobId, n.id, list, 0, null); } }),
        el("span", { class: "muted", text: "  " + nodeLines(n).join(" · ") })]));
    });
    return ul;
  }

  function listInvocations(jobId, op, list, offset, status) {
    var params = { offset: offset };
    if (op) { params.op = op; }
    if (status) { params.status = status; }
    api("/api/jobs/" + encodeURIComponent(jobId) + "/invocations", params).then(function (page) {
      list.textContent = "";
      list.appendChild(el("h3", { text: (op || "all operations") + (status ? " · " + status : "") + " · " + page.total + " invocation(s)" }));
      var body = el("tbody");
      page.items.forEach(function (inv) {
        body.appendChild(el("tr", { class: "row invocation", "data-address": inv.address, onclick: function () { openPanel(jobId, inv.address); } }, [
          el("td", { text: inv.address, class: "mono" }), el("td", { text: inv.status, class: "status-" + inv.status }),
          el("td", { text: inv.from_cache ? "cached" : "" }), el("td", { text: inv.reason || "" }),
          el("td", { text: inv.error || "", class: "wrap" })
        ]));
      });
      list.appendChild(el("div", { class: "scroll" }, [el("table", {}, [el("thead", {}, [el("tr", {}, ["address", "status", "", "reason", "error"].map(function (c) { return el("th", { text: c }); }))]), body])]));
      var pager = el("div", { class: "pager" }, [
        offset > 0 ? el("button", { text: "previous", onclick: function () { listInvocations(jobId, op, list, Math.max(0, offset - PAGE), status); } }) : null,
        el("span", { class: "muted", text: (page.total ? offset + 1 : 0) + "–" + Math.min(offset + PAGE, page.total) + " of " + page.total }),
        offset + PAGE < page.total ? el("button", { text: "next", onclick: function () { listInvocations(jobId, op, list, offset + PAGE, status); } }) : null,
        status ? el("button", { text: "all statuses", onclick: function () { listInvocations(jobId, op, list, 0, null); } }) : null
      ]);
      list.appendChild(pager);
    }).catch(fail);
  }

  // invocation panel -----------------------------------------------------------------
  function value(v) {
    if (v === null || v === undefined) { return el("span", { class: "muted", text: "null" }); }
    if (typeof v !== "object") { return el("pre", { text: typeof v === "string" ? v : JSON.stringify(v) }); }
    if (Array.isArray(v)) { return el("div", {}, v.map(value)); }
    if (v.kind === "entity") {
      return el("div", { class: "entity" }, [el("span", { class: "type", text: v.type })].concat(Object.keys(v.fields).map(function (k) {
        return el("div", {}, [el("span", { class: "muted", text: k + ": " }), value(v.fields[k])]);
      })));
    }
    if (v.kind === "ref") { return el("div", {}, [el("span", { class: "muted", text: "ref " + v.type + " " + v.id.slice(0, 12) }), v.entity ? value(v.entity) : null]); }
    if (v.kind === "array") {
      return el("div", {}, [el("span", { class: "muted", text: "Array over [" + v.dims.join(", ") + "], " + v.size + " cell(s)" })].concat(v.cells.map(function (c) {
        return el("div", {}, [el("span", { class: "muted", text: JSON.stringify(c[0]) + " → " }), value(c[1])]);
      })));
    }
    if (v.kind === "text") { return el("pre", { text: v.text + "\n… " + v.omitted + " more characters" }); }
    if (v.kind === "omitted") { return el("span", { class: "muted", text: "… " + v.count + " more" }); }
    return el("pre", { text: JSON.stringify(v, null, 2) });
  }

  function openPanel(jobId, address) {
    api("/api/jobs/" + encodeURIComponent(jobId) + "/invocation", { address: address }).then(function (d) {
      var panel = document.getElementById("panel");
      panel.hidden = false;
      panel.textContent = "";
      panel.setAttribute("data-address", d.address);
      panel.removeAttribute("data-cell");
      var facts = [["step", d.step], ["status", d.status], ["reason", d.reason], ["category", d.category],
        ["from cache", d.from_cache ? "yes" : "no"], ["started", d.started], ["seconds", d.seconds === null ? null : d.seconds.toFixed(3)],
        ["tokens", d.input_tokens + " in / " + d.output_tokens + " out"], ["cost", usd(d.cost_usd)], ["attempt", d.attempt]];
      var kv = el("dl", { class: "kv" });
      facts.forEach(function (f) { if (f[1] !== null && f[1] !== undefined) { kv.appendChild(el("dt", { text: f[0] })); kv.appendChild(el("dd", { text: String(f[1]) })); } });
      var parts = [el("button", { class: "close", text: "close", onclick: function () { panel.hidden = true; } }),
        el("h2", { text: d.address }), kv];
      if (d.error) { parts.push(el("h3", { text: "error" }), el("pre", { class: "error", text: d.error })); }
      if (d.logs.length) { parts.push(el("h3", { text: "logs" }), el("pre", { class: "logs", text: d.logs.join("\n") })); }
      if (d.warnings.length) { parts.push(el("h3", { text: "hermeticity" }), el("pre", { text: d.warnings.join("\n") })); }
      parts.push(el("h3", { text: "inputs" }));
      Object.keys(d.inputs).forEach(function (k) {
        parts.push(el("div", { class: "value" }, [el("strong", { text: k }), d.inputs[k].recorded ? value(d.inputs[k].value) : el("span", { class: "muted", text: " (not recorded)" })]));
      });
      parts.push(el("h3", { text: "result" }), el("div", { class: "value result" }, [value(d.result)]));
      if (d.model_calls.length) { parts.push(el("h3", { text: "model calls" })); d.model_calls.forEach(function (c) { parts.push(transcript(c)); }); }
      if (d.traceback) { parts.push(el("h3", { text: "traceback" }), el("pre", { text: d.traceback })); }
      if (d.conflict) { parts.push(el("h3", { text: "conflict" }), el("pre", { text: d.conflict.summary })); }
      parts.forEach(function (p) { panel.appendChild(p); });
    }).catch(fail);
  }

  // tracing tasks --------------------------------------------------------------------
  function tasksPage() {
    api("/api/tasks").then(function (tasks) {
      show([el("h1", { text: "Tracing tasks" }), tasks.length ? el("table", {}, [el("tbody", {}, tasks.map(function (t) {
        return el("tr", { class: "row", onclick: function () { location.hash = "#/task/" + encodeURIComponent(t.task_id); } }, [
          el("td", { text: t.task_id }), el("td", { text: t.name }), el("td", { text: t.status, class: "status-" + t.status }), el("td", { text: t.nodes + " nodes" })]);
      }))]) : el("p", { class: "muted", text: "No tracing tasks in this store." })]);
    }).catch(fail);
  }

  function taskPage(taskId) {
    api("/api/tasks/" + encodeURIComponent(taskId)).then(function (task) {
      var children = {};
      task.nodes.forEach(function (n) { (children[n.parent_id] = children[n.parent_id] || []).push(n); });
      function branch(parent) {
        return el("ul", {}, (children[parent] || []).map(function (n) {
          return el("li", { "data-node": n.id }, [el("span", { text: n.kind + " " + n.name + " " }), el("span", { class: "status-" + n.status, text: n.status }),
            el("span", { class: "muted", text: (n.reason ? " [" + n.reason + "] " + (n.error || "") : "") + (n.input_tokens ? " · " + n.input_tokens + "/" + n.output_tokens + " tok" : "") + (n.cost_usd ? " · " + usd(n.cost_usd) : "") }),
            branch(n.id)]);
        }));
      }
      show([el("h1", { text: task.name + " · " + task.task_id }), branch(null)]);
    }).catch(fail);
  }

  function route() {
    var hash = location.hash || "", m, path = location.protocol === "file:" ? "/" : location.pathname;
    var where = hash && hash !== "#" ? hash.slice(1) : path;
    document.getElementById("panel").hidden = true;
    if ((m = where.match(/^\/job\/([^/?]+)(?:\?(.*))?$/))) {
      var opts = {};
      new URLSearchParams(m[2] || location.search.slice(1)).forEach(function (v, k) { opts[k] = v; });
      jobPage(decodeURIComponent(m[1]), opts);
    }
    else if ((m = where.match(/^\/compare\/([^/]+)\/([^/?]+)$/))) { comparePage(decodeURIComponent(m[1]), decodeURIComponent(m[2])); }
    else if ((m = where.match(/^\/task\/(.+)$/))) { taskPage(decodeURIComponent(m[1])); }
    else if (where === "/tasks") { tasksPage(); }
    else if (DATA && DATA.jobs.length === 1) { jobPage(DATA.jobs[0].job_id); }
    else { jobsPage(); }
  }
  window.addEventListener("hashchange", route);
  route();
})();
