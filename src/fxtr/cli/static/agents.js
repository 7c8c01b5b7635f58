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

  function trajectory(t, el) {
    var head = el("h3", { class: "trajectory-head" }, [
      el("span", { text: (t.sample !== null && t.sample !== undefined ? "sample " + t.sample + " · " : "") + "trajectory" }),
      el("span", { class: "stop stop-" + t.stop.replace(":", "-"), text: " " + t.stop }),
      el("span", { class: "muted small", text: " · " + facts(t) + (t.score !== undefined && t.score !== null ? " · score " + t.score : "") })]);
    var list = el("ol", { class: "trajectory" }, t.events.map(function (e) { return event(e, el); }));
    var end = [el("div", { class: "answer" }, [el("span", { class: "muted", text: "answer " }),
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
    return el("section", { class: "agent-trajectory", "data-address": t.address }, [head, list].concat(end));
  }

  window.fxtrAgents = {
    render: function (trajectories, el) {
      return trajectories.map(function (t) { return trajectory(t, el); });
    }
  };
})();
