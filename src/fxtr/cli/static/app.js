// fxtr viewer: plain JS, no build, no network beyond this origin (none at all when exported).
// Everything that comes from a record is put in the page with textContent, never as markup.
(function () {
  "use strict";

  var PAGE = 200;
  var embedded = document.getElementById("fxtr-data");
  var DATA = embedded ? JSON.parse(embedded.textContent) : null;

  function api(path, params) {
    if (DATA) { return Promise.resolve(fromEmbedded(path, params || {})); }
    var query = new URLSearchParams(params || {}).toString();
    return fetch(path + (query ? "?" + query : "")).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) { throw new Error(body.error || r.statusText); }
        return body;
      });
    });
  }

  function fromEmbedded(path, params) {
    var m;
    if (path === "/api/jobs") { return DATA.jobs; }
    if (path === "/api/tasks") { return []; }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)$/))) { return DATA.job[decodeURIComponent(m[1])]; }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)\/invocations$/))) {
      var rows = DATA.invocations[decodeURIComponent(m[1])].filter(function (r) {
        return (!params.op || stripKeys(r.address) === params.op) &&
               (!params.status || r.status === params.status);
      });
      var offset = Number(params.offset || 0);
      return { total: rows.length, offset: offset, items: rows.slice(offset, offset + PAGE) };
    }
    if ((m = path.match(/^\/api\/jobs\/([^/]+)\/invocation$/))) {
      var block = DATA.index[decodeURIComponent(m[1])][params.address];
      return JSON.parse(document.getElementById(block).textContent);  // parsed only when opened
    }
    throw new Error("not in this export: " + path);
  }

  function stripKeys(address) {
    var out = "", depth = 0, quoted = false;
    for (var i = 0; i < address.length; i++) {
      var c = address[i];
      if (depth && c === '"') { quoted = !quoted; }
      else if (c === "[" && !quoted) { depth++; continue; }
      else if (c === "]" && !quoted && depth) { depth--; continue; }
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
  function main() { return document.getElementById("main"); }
  function show(nodes) { var m = main(); m.textContent = ""; nodes.forEach(function (n) { if (n) { m.appendChild(n); } }); }
  function fail(err) { show([el("p", { class: "notice", text: "Error: " + err.message })]); }

  // jobs page ------------------------------------------------------------------------
  function jobsPage() {
    api("/api/jobs").then(function (jobs) {
      var status = el("select", { id: "filter-status" }, ["", "succeeded", "failed", "needs_review", "error"].map(function (s) {
        return el("option", { value: s, text: s || "any status" });
      }));
      var workflow = el("input", { id: "filter-workflow", placeholder: "workflow" });
      var body = el("tbody");
      var columns = ["job", "workflow", "status", "attempts", "ran", "cached", "failed", "tokens", "cost", "started", "commit"];
      var table = el("table", { id: "jobs" }, [el("thead", {}, [el("tr", {}, columns.map(function (c) {
        return el("th", { text: c, class: ["attempts", "ran", "cached", "failed", "tokens", "cost"].indexOf(c) >= 0 ? "num" : "" });
      }))]), body]);
      function render() {
        body.textContent = "";
        var shown = jobs.filter(function (j) {
          return (!status.value || j.status === status.value) &&
                 (!workflow.value || (j.workflow || "").indexOf(workflow.value) >= 0);
        }).slice(0, PAGE);
        shown.forEach(function (j) {
          body.appendChild(el("tr", { class: "row", "data-job": j.job_id, onclick: function () { location.hash = "#/job/" + encodeURIComponent(j.job_id); } }, [
            el("td", { text: j.job_id }), el("td", { text: j.workflow }),
            el("td", { text: j.status, class: "status-" + j.status }),
            el("td", { text: String(j.attempts), class: "num" }), el("td", { text: String(j.ran), class: "num" }),
            el("td", { text: String(j.cached), class: "num" }), el("td", { text: String(j.failed), class: "num" }),
            el("td", { text: String(j.tokens), class: "num" }), el("td", { text: usd(j.cost_usd), class: "num" }),
            el("td", { text: j.started || "" }), el("td", { text: j.commit || "" })
          ]));
        });
      }
      status.addEventListener("change", render);
      workflow.addEventListener("input", render);
      render();
      show([el("h1", { text: "Jobs" }), el("div", { class: "filters" }, [status, workflow]), table,
            jobs.length > PAGE ? el("p", { class: "muted", text: "showing the first " + PAGE + "; filter to narrow" }) : null]);
    }).catch(fail);
  }

  // job page -------------------------------------------------------------------------
  function jobPage(jobId) {
    api("/api/jobs/" + encodeURIComponent(jobId)).then(function (job) {
      var row = job.row, graph = job.graph;
      var head = el("div", {}, [
        el("h1", { text: row.workflow + " · " + row.job_id }),
        el("p", {}, [el("span", { text: row.status, class: "status-" + row.status }),
          el("span", { class: "muted", text: " · attempt " + row.attempts + " · " + row.ran + " ran, " + row.cached +
            " cached, " + row.failed + " failed · " + row.tokens + " tokens · " + usd(row.cost_usd) +
            (row.commit ? " · commit " + row.commit : "") })])
      ]);
      var list = el("div", { id: "invocations" });
      var drawing = graph.truncated ? tree(graph, jobId, list) : draw(graph, jobId, list);
      show([head, graph.truncated ? el("p", { class: "notice", text: "This job has " + graph.nodes.length +
        " operations, too many to draw; shown as a tree." }) : null, drawing, list]);
      var failed = graph.nodes.filter(function (n) { return (n.counts.failed || 0) > 0; })[0];
      listInvocations(jobId, failed ? failed.id : null, list, 0, failed ? "failed" : null);
    }).catch(fail);
  }

  function nodeLines(n) {
    var c = n.counts, parts = [];
    ["succeeded", "failed", "skipped", "needs_review", "running"].forEach(function (s) { if (c[s]) { parts.push(c[s] + " " + (s === "succeeded" ? "ok" : s.replace("_", " "))); } });
    var lines = [parts.join(" · ") || "no invocations"];
    if (n.kind === "step" && n.invocations) { lines.push(n.ran + " ran · " + n.cached + " cached · " + (n.input_tokens + n.output_tokens) + " tok · " + usd(n.cost_usd)); }
    return lines;
  }

  function draw(graph, jobId, list) {
    var W = 210, H = 76;
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
      root.appendChild(svg("text", { class: "param", x: mx - 20, y: (y1 + y2) / 2 - 4 }, e.param));
    });
    graph.nodes.forEach(function (n) {
      var failed = (n.counts.failed || 0) > 0;
      var g = svg("g", { class: "node kind-" + n.kind + (failed ? " failed" : ""), "data-op": n.id, transform: "translate(" + n.x + "," + n.y + ")" });
      g.appendChild(svg("rect", { width: W, height: H }));
      g.appendChild(svg("text", { x: 8, y: 17 }, n.name + (n.callee && n.callee !== n.name ? "  (" + n.callee + ")" : "")));
      nodeLines(n).forEach(function (line, i) { g.appendChild(svg("text", { class: "sub", x: 8, y: 35 + 15 * i }, line)); });
      var reasons = Object.keys(n.reasons || {});
      if (reasons.length) { g.appendChild(svg("text", { class: "reason", x: 8, y: 68 }, "reason: " + reasons.join(", "))); }
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
      list.appendChild(el("h2", { text: (op || "all operations") + (status ? " · " + status : "") + " · " + page.total + " invocation(s)" }));
      var body = el("tbody");
      page.items.forEach(function (inv) {
        body.appendChild(el("tr", { class: "row invocation", "data-address": inv.address, onclick: function () { openPanel(jobId, inv.address); } }, [
          el("td", { text: inv.address }), el("td", { text: inv.status, class: "status-" + inv.status }),
          el("td", { text: inv.from_cache ? "cached" : "" }), el("td", { text: inv.reason || "" }),
          el("td", { text: inv.error || "" })
        ]));
      });
      list.appendChild(el("table", {}, [el("thead", {}, [el("tr", {}, ["address", "status", "", "reason", "error"].map(function (c) { return el("th", { text: c }); }))]), body]));
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
      if (d.model_calls.length) { parts.push(el("h3", { text: "model calls" }), el("pre", { text: d.model_calls.map(function (c) { return c.model + " " + c.status + " " + (c.input_tokens || 0) + "/" + (c.output_tokens || 0) + " tok " + usd(c.cost_usd === undefined ? null : c.cost_usd) + (c.reason ? " [" + c.reason + "] " + c.error : ""); }).join("\n") })); }
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
    var hash = location.hash || "#/", m;
    if ((m = hash.match(/^#\/job\/(.+)$/))) { jobPage(decodeURIComponent(m[1])); }
    else if ((m = hash.match(/^#\/task\/(.+)$/))) { taskPage(decodeURIComponent(m[1])); }
    else if (hash === "#/tasks") { tasksPage(); }
    else if (DATA && DATA.jobs.length === 1) { jobPage(DATA.jobs[0].job_id); }
    else { jobsPage(); }
  }
  window.addEventListener("hashchange", route);
  route();
})();
