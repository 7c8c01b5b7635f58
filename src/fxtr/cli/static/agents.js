// fxtr viewer: agent trajectories (DESIGN §12). A cell of an agent eval shows each sample's
// trajectory in time order: the assistant's messages with each tool call's name and
// arguments, the tool results (errors marked), the simulated user's turns, the answer, the
// stop, and the final environment with its difference from the expected one. Loaded before
// app.js, which calls window.fxtrAgents.render(trajectories, el) from its cell panel.
(function () {
  "use strict";

  function json(v) { return JSON.stringify(v); }

  function event(e, el) {
    if (e.kind === "system") {
      return el("li", { class: "ev ev-system" }, [el("details", {}, [el("summary", { text: "system prompt" }), el("pre", { text: e.text })])]);
    }
    if (e.kind === "user" || e.kind === "user_sim") {
      return el("li", { class: "ev ev-" + e.kind }, [el("div", { class: "who", text: e.kind === "user" ? "user" : "simulated user" }), el("pre", { text: e.text })]);
    }
    if (e.kind === "assistant") {
      var parts = [el("div", { class: "who", text: "assistant · turn " + e.turn })];
      if (e.text) { parts.push(el("pre", { text: e.text })); }
      e.calls.forEach(function (c) {
        parts.push(el("div", { class: "tool-call mono", "data-call": c.id }, [
          el("span", { class: "arrow", text: "→ " }), el("strong", { text: c.name }), el("span", { text: "(" + json(c.arguments) + ")" })]));
      });
      return el("li", { class: "ev ev-assistant" }, parts);
    }
    var cls = "ev ev-tool" + (e.is_error ? " tool-error" : "");
    var shown = [
      el("div", { class: "who", text: "tool result · " + e.name + (e.is_error ? " · error (reason tool_error)" : "") }),
      el("pre", { text: e.content })];
    if (e.env_changes && e.env_changes.length) {  // what the call changed in the environment
      shown.push(el("div", { class: "muted small", text: "environment changed:" }));
      shown.push(el("ul", { class: "env-changes" }, e.env_changes.map(function (c) { return el("li", { class: "mono", text: c }); })));
    }
    return el("li", { class: cls, "data-call": e.id }, shown);
  }

  function facts(t) {
    var bits = [t.turns + " turn" + (t.turns === 1 ? "" : "s"), t.tool_calls + " tool call" + (t.tool_calls === 1 ? "" : "s")];
    if (t.tool_errors) { bits.push(t.tool_errors + " tool error" + (t.tool_errors === 1 ? "" : "s")); }
    bits.push((t.input_tokens + t.output_tokens) + " tokens");
    return bits.join(" · ");
  }

  // a trajectory a failed step stopped: where, why (its reason) and the error
  function failure(f, el) {
    var where = f.address.slice(f.address.lastIndexOf("/") + 1);
    return el("div", { class: "trajectory-failed", "data-reason": f.reason || "" }, [
      el("div", { class: "who", text: "failed at " + where + " (" + f.step + ") · reason " + (f.reason || "unknown") }),
      el("pre", { class: "error", text: f.error || "" })]);
  }

  function trajectory(t, el) {
    var head = el("h3", { class: "trajectory-head" }, [
      el("span", { text: (t.sample !== null && t.sample !== undefined ? "sample " + t.sample + " · " : "") + "trajectory" }),
      el("span", { class: "stop stop-" + t.stop.replace(":", "-"), text: " " + t.stop }),
      el("span", { class: "muted small", text: " · " + facts(t) + (t.score !== undefined && t.score !== null ? " · score " + t.score : "") })]);
    var list = el("ol", { class: "trajectory" }, t.events.map(function (e) { return sandboxEvent(t, e, event(e, el), el); }));
    var end = [t.failed ? failure(t.failed, el) : el("div", { class: "answer" }, [el("span", { class: "muted", text: "answer " }),
      t.answer === null ? el("span", { class: "muted", text: "none (" + t.stop + ")" }) : el("strong", { text: t.answer })])];
    if (t.env !== null && t.env !== undefined) {
      var env = [el("summary", { text: "final environment" })];
      var diffs = t.env_differences || [];
      if (diffs.length) {
        env.push(el("div", { class: "muted small", text: "differs from the expected (final != expected):" }));
        env.push(el("ul", { class: "env-diff" }, diffs.map(function (d) { return el("li", { class: "mono", text: d }); })));
      } else if (t.score === 1 && t.explanation === "the environment matches") {
        env.push(el("div", { class: "env-ok", text: "matches the expected environment" }));
      }
      env.push(el("pre", { class: "env", text: JSON.stringify(t.env, null, 2) }));
      var box = el("details", { class: "final-env" }, env);
      if (diffs.length) { box.setAttribute("open", ""); }
      end.push(box);
    }
    if (t.explanation && !(t.env_differences || []).length) {
      end.push(el("div", { class: "muted small", text: "score: " + t.explanation }));
    }
    if (t.sandbox) { end.push(sandboxFinal(t.sandbox, el)); }
    return el("section", { class: "agent-trajectory", "data-address": t.address }, [head, list].concat(end));
  }

  // ---- sandbox agents (DESIGN §17): each sandbox call's command or code and its output,
  // the layer it made as a diff, and the final tree. Data: trajectory.sandbox, from
  // fxtr.sandbox._report.sandbox_views.
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  function callArguments(t, id) {
    for (var i = 0; i < t.events.length; i++) {
      var calls = t.events[i].calls || [];
      for (var j = 0; j < calls.length; j++) { if (calls[j].id === id) { return calls[j]; } }
    }
    return null;
  }

  function whatRan(call, el) {
    var a = (call && call.arguments) || {};
    if (call && call.name === "bash" && a.cmd !== undefined) { return el("pre", { class: "sb-command", text: "$ " + a.cmd }); }
    if (call && call.name === "python" && a.code !== undefined) { return el("pre", { class: "sb-command", text: a.code }); }
    if (call && call.name === "text_editor") {
      return el("pre", { class: "sb-command", text: "text_editor " + a.command + " " + a.path });
    }
    return null;
  }

  function ending(c, timeout) {
    if (c.timed_out) { return "timed out after " + timeout + " s (process tree killed)"; }
    if (c.stopped) { return "stopped: " + c.stopped; }
    return "exit " + c.exit_code;
  }

  function commandView(c, timeout, el) {
    var bad = c.timed_out || c.stopped || c.exit_code !== 0;
    var bits = [ending(c, timeout), (c.seconds || 0).toFixed(2) + " s"];
    if (c.cut) { bits.push("output cut: " + c.cut + " bytes past the limit"); }
    var parts = [el("div", { class: "sb-exit" + (bad ? " sb-bad" : ""), text: c.argv.join(" ") + " · " + bits.join(" · ") })];
    var out = [];  // the result above is what the model read; the streams apart, folded
    if (c.stdout) { out.push(el("div", { class: "sb-label", text: "stdout" }), el("pre", { class: "sb-stdout", text: c.stdout })); }
    if (c.stderr) { out.push(el("div", { class: "sb-label", text: "stderr" }), el("pre", { class: "sb-stderr", text: c.stderr })); }
    var sizes = "stdout " + c.stdout.length + " chars · stderr " + c.stderr.length + " chars";
    parts.push(out.length ? el("details", { class: "sb-streams" }, [el("summary", { text: sizes })].concat(out)) : el("div", { class: "muted small", text: "no output" }));
    return el("div", { class: "sb-run" }, parts);
  }

  function diffView(text, el) {
    return el("pre", { class: "sb-diff" }, text.replace(/\n$/, "").split("\n").map(function (line) {
      var cls = line.indexOf("@@") === 0 ? "hunk" : line.indexOf("+++") === 0 || line.indexOf("---") === 0 ? "head" : line[0] === "+" ? "add" : line[0] === "-" ? "del" : "ctx";
      return el("span", { class: "sb-" + cls, text: line + "\n" });
    }));
  }

  function size(n) { return n === null || n === undefined ? "none" : n + " B"; }

  function layerView(layer, el) {
    var files = layer.files || [];
    if (!files.length) { return el("div", { class: "sb-layer muted small", text: "layer: no file changed" }); }
    var items = files.map(function (f) {
      var head = [f.change, f.type === "file" ? "" : f.type, f.path, f.mode ? "mode " + f.mode : ""].filter(Boolean).join(" ");
      var parts = [el("div", { class: "sb-file sb-" + f.change, text: head })];
      if (f.diff) { parts.push(diffView(f.diff, el)); }
      else if (f.binary) { parts.push(el("div", { class: "muted small", text: "binary: " + size(f.size_before) + " → " + size(f.size_after) })); }
      else if (f.target !== undefined) { parts.push(el("div", { class: "muted small mono", text: "→ " + f.target })); }
      return el("li", {}, parts);
    });
    return el("div", { class: "sb-layer" }, [el("div", { class: "sb-label", text: "layer: " + plural(files.length, "file") + " changed" }), el("ul", {}, items)]);
  }

  function sandboxEvent(t, e, li, el) {
    var call = e.kind === "tool_result" && t.sandbox && t.sandbox.calls[e.id];
    if (!call) { return li; }
    var parts = [whatRan(callArguments(t, e.id), el)];
    call.commands.forEach(function (c) { parts.push(commandView(c, t.sandbox.timeout, el)); });
    parts.push(layerView(call.layer, el));
    li.appendChild(el("div", { class: "sandbox-call" }, parts));
    return li;
  }

  function sandboxFinal(sb, el) {
    var files = (sb.final && sb.final.files) || [];
    var rows = files.map(function (f) {
      var label = f.path + (f.type === "dir" ? "/" : "") + "  " + f.mode + (f.size !== undefined && f.type !== "dir" ? " · " + size(f.size) : "") + (f.target !== undefined ? " → " + f.target : "");
      if (f.text === undefined) { return el("li", { class: "mono", text: label }); }
      return el("li", {}, [el("details", {}, [el("summary", { class: "mono", text: label }), el("pre", { class: "sb-text", text: f.text })])]);
    });
    var head = "final tree · " + plural(files.filter(function (f) { return f.type !== "dir"; }).length, "file") + " · " + sb.backend;
    if (sb.backend === "local") { head += " (no isolation)"; }
    return el("details", { class: "sandbox-tree" }, [el("summary", { text: head }), el("ul", { class: "sb-tree" }, rows)]);
  }

  window.fxtrAgents = {
    render: function (trajectories, el) {
      return trajectories.map(function (t) { return trajectory(t, el); });
    }
  };
})();
