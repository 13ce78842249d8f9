// omp board: the task board and graph, and the backlog's actions (add, cancel, retry, a task's
// diff and merge). Every state shown is the one `omp team status --json` computed (`state`);
// nothing here works a state out again. Text from task records goes in as text, never HTML.
"use strict";

window.OmpTasks = function (B) {
  const { el, svg, $, clear, post, say } = B;

  // The states of `omp team status` (omp/tasks/graph.py STATES), in the order they are shown.
  const STATES = [
    ["blocked", "Blocked"], ["ready", "Ready"], ["in_progress", "In progress"],
    ["verifying", "Verifying"], ["to_merge", "To merge"], ["done", "Done"], ["failed", "Failed"],
    ["interrupted", "Interrupted"], ["cancelled", "Cancelled"],
  ];
  const ALWAYS = new Set(["ready", "in_progress", "done"]); // shown even when empty
  const ENDED = new Set(["failed", "interrupted", "cancelled"]);
  const RETRYABLE = ENDED; // omp.tasks.queue.RETRYABLE
  const CANCELLABLE = new Set(["blocked", "ready", "in_progress", "verifying", "failed", "interrupted"]);
  // A team without a backlog has no `state`: its records' own status, in the board's words.
  const PLAIN = { pending: "ready", completed: "done", canceled: "cancelled" };
  const GRAPH_MAX = 150; // tasks drawn in the graph; a bigger backlog is shown by its columns
  const NODE_W = 170, NODE_H = 38, GAP_X = 46, GAP_Y = 12, PAD = 8;

  let drawn = null; // what the board was last drawn from: redrawn only when it changes
  let cancelOpen = null; // {id, reason}: the task whose cancel form is open

  function stateOf(t) {
    if (t.state) return String(t.state);
    const s = t.status ? String(t.status) : "unreadable";
    return PLAIN[s] || s;
  }
  function word(s) { return String(s).replace(/_/g, " "); }
  function title(t) { return t.title || String(t.description || "").split("\n")[0] || ""; }
  function byId(tasks) {
    const m = new Map();
    for (const t of tasks) if (t.id !== undefined && t.id !== null) m.set(String(t.id), t);
    return m;
  }
  function sortId(a, b) {
    const na = /^\d+$/.test(a), nb = /^\d+$/.test(b);
    if (na && nb) return Number(a) - Number(b);
    if (na !== nb) return na ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  // Keyboard focus survives a redraw: the element with the same data-key gets it back.
  function keepFocus(box, fn) {
    const a = document.activeElement;
    const key = a && box.contains(a) ? a.getAttribute("data-key") : null;
    fn();
    if (key) {
      const again = box.querySelector('[data-key="' + CSS.escape(key) + '"]');
      if (again) again.focus();
    }
  }

  function focusTask(id) {
    const card = document.getElementById("task-" + id);
    if (card) { card.scrollIntoView({ block: "nearest" }); card.focus(); }
  }

  function link(id, all, key) {
    const t = all.get(String(id));
    const label = "Task " + id + (t ? ": " + title(t) + " (" + word(stateOf(t)) + ")" : " (no such task)");
    return el("a", {
      href: "#task-" + id, class: "tlink" + (t ? " tstate-" + stateOf(t) : ""), text: "#" + id,
      "aria-label": label, title: label, "data-key": key,
      onclick: (ev) => { ev.preventDefault(); focusTask(id); },
    });
  }

  function links(words, ids, all, key, cls) {
    const out = el("div", { class: "links" + (cls ? " " + cls : "") }, words + " ");
    ids.forEach((id, i) => {
      if (i) out.append(", ");
      out.append(link(id, all, key + "-" + id));
    });
    return out;
  }

  // ---- the board -----------------------------------------------------------------------------
  function render(st, team) {
    const tasks = (st.tasks || []).filter((t) => t && typeof t === "object");
    const key = JSON.stringify([team, tasks, st.backlog || null, cancelOpen && cancelOpen.id]);
    if (key === drawn) return;
    drawn = key;
    keepFocus($("tasks-section"), () => {
      summary(st, tasks);
      graph(tasks);
      columns(tasks);
    });
  }

  function summary(st, tasks) {
    const bl = st.backlog;
    let text = tasks.length ? tasks.length + " task(s)" : "no tasks";
    if (bl && bl.states) {
      text += ": " + Object.entries(bl.states).map(([k, n]) => n + " " + word(k)).join(", ");
      if (bl.finished) text += "; nothing more can run";
      if ((bl.stuck || []).length) text += "; waiting for a failed or cancelled task: " + bl.stuck.map((i) => "#" + i).join(", ");
    }
    $("tasks-summary").textContent = text;
  }

  function columns(tasks) {
    const box = $("tasks");
    clear(box);
    const all = byId(tasks);
    const by = {};
    for (const t of tasks) (by[stateOf(t)] = by[stateOf(t)] || []).push(t);
    const cols = STATES.slice();
    for (const s of Object.keys(by)) if (!cols.some((c) => c[0] === s)) cols.push([s, word(s)]);
    for (const [key, name] of cols) {
      const items = by[key] || [];
      if (!items.length && !ALWAYS.has(key)) continue;
      const ul = el("ul", {});
      for (const t of items) ul.append(card(t, key, all));
      box.append(el("section", { class: "column", "data-column": key, "aria-label": name + " tasks" },
        el("h4", { text: name + " (" + items.length + ")" }), ul));
    }
  }

  function card(t, state, all) {
    if (t.error) {
      return el("li", { class: "task tstate-unreadable", "data-task": t.id ?? "" },
        el("div", { text: "#" + (t.id ?? "?") + " unreadable" }),
        el("div", { class: "meta", text: t.message || t.error }));
    }
    const id = String(t.id);
    const meta = [];
    if (t.owner) meta.push(t.owner);
    if (t.branch) meta.push(t.branch);
    if (t.priority) meta.push("priority " + t.priority);
    if (t.agent) meta.push("for " + t.agent);
    if (t.verify && t.verify.status) meta.push("check " + t.verify.status);
    if (t.mergedCommit) meta.push("merged " + String(t.mergedCommit).slice(0, 10));
    if (t.retried) meta.push("retried " + t.retried + "x");
    const li = el("li", {
      class: "task tstate-" + state, id: "task-" + id, "data-task": id, tabindex: "-1",
      "data-key": "card-" + id, "aria-label": "Task " + id + ", " + word(state),
    },
    el("div", { class: "ttitle", text: "#" + id + " " + title(t) }),
    meta.length ? el("div", { class: "meta", text: meta.join(" · ") }) : null);
    const failed = t.blockedByFailed || [];
    if (failed.length) {
      // one phrase per state: "blocked by failed #1", "blocked by cancelled #3"
      const groups = {};
      for (const b of failed) {
        const bt = all.get(String(b));
        const s = bt ? stateOf(bt) : "failed";
        (groups[s] = groups[s] || []).push(b);
      }
      for (const [s, ids] of Object.entries(groups)) li.append(links("blocked by " + word(s), ids, all, "stuck-" + id, "bad"));
    } else if ((t.waitingFor || []).length) {
      li.append(links("waits for", t.waitingFor, all, "waits-" + id));
    } else if ((t.blockedBy || []).length) {
      li.append(links("after", t.blockedBy, all, "after-" + id));
    }
    if ((t.dependents || []).length) li.append(links("needed by", t.dependents, all, "needed-" + id));
    const acts = el("div", { class: "options" });
    if (RETRYABLE.has(state)) acts.append(button("Retry", "Retry task " + id, "retry-" + id, () => retry(id)));
    if (CANCELLABLE.has(state)) {
      acts.append(button("Cancel…", "Cancel task " + id + "…", "cancel-" + id, () => {
        cancelOpen = { id, reason: "" };
        drawn = null;
        B.redraw();
        const box = document.querySelector('[data-key="reason-' + CSS.escape(id) + '"]');
        if (box) box.focus();
      }));
    }
    if (t.branch) acts.append(button("Diff", "Diff of task " + id, "diff-" + id, () => B.openDiff({ task: id })));
    if (state === "to_merge" && t.branch) acts.append(button("Merge", "Merge task " + id, "merge-" + id, () => merge(id, t.branch)));
    if (acts.childNodes.length) li.append(acts);
    if (cancelOpen && cancelOpen.id === id && CANCELLABLE.has(state)) li.append(cancelForm(id));
    return li;
  }

  function button(text, label, key, fn) {
    return el("button", { type: "button", text, "aria-label": label, "data-key": key, onclick: fn });
  }

  function cancelForm(id) {
    const fid = "reason-" + id;
    const input = el("input", { id: fid, type: "text", "data-key": fid, value: cancelOpen.reason });
    input.value = cancelOpen.reason;
    input.addEventListener("input", () => { cancelOpen.reason = input.value; });
    const form = el("form", { class: "cancel-form" },
      el("label", { for: fid, text: "Why cancel task " + id + " (told to its worker; optional)" }),
      input,
      el("div", { class: "options" },
        el("button", { type: "submit", text: "Cancel task " + id, "data-key": "cancel-go-" + id }),
        button("Keep it", "Keep task " + id, "cancel-keep-" + id, () => { cancelOpen = null; drawn = null; B.redraw(); })));
    form.addEventListener("submit", (ev) => { ev.preventDefault(); cancel(id, input.value); });
    return form;
  }

  // ---- the graph: tasks in columns by how deep they wait, an arrow from blocker to task -----
  function graph(tasks) {
    const fig = $("task-graph");
    const box = $("task-graph-svg");
    clear(box);
    const all = byId(tasks);
    const nodes = [...all.values()].filter((t) => !t.error);
    const edges = [];
    for (const t of nodes) for (const b of t.blockedBy || []) if (all.has(String(b))) edges.push([String(b), String(t.id)]);
    fig.hidden = !edges.length;
    if (!edges.length) return;
    if (nodes.length > GRAPH_MAX) {
      box.append(el("p", { class: "note", text: nodes.length + " tasks: too many to draw; the columns below show each" }));
      return;
    }
    // depth: the longest chain of blockers above a task (a cycle cannot be written: capped anyway)
    const depth = new Map(nodes.map((t) => [String(t.id), 0]));
    for (let pass = 0; pass < nodes.length; pass++) {
      let moved = false;
      for (const [from, to] of edges) {
        if (depth.get(to) < depth.get(from) + 1) { depth.set(to, depth.get(from) + 1); moved = true; }
      }
      if (!moved) break;
    }
    const layers = [];
    for (const id of [...depth.keys()].sort(sortId)) (layers[depth.get(id)] = layers[depth.get(id)] || []).push(id);
    const at = new Map();
    layers.forEach((ids, x) => ids.forEach((id, y) => at.set(id, [PAD + x * (NODE_W + GAP_X), PAD + y * (NODE_H + GAP_Y)])));
    const W = PAD * 2 + layers.length * (NODE_W + GAP_X) - GAP_X;
    const H = PAD * 2 + Math.max(...layers.map((l) => l.length)) * (NODE_H + GAP_Y) - GAP_Y;
    const said = edges.map(([f, t]) => "#" + t + " after #" + f + " (" + word(stateOf(all.get(f))) + ")");
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
      "aria-label": "Task graph: " + said.join("; ") });
    const defs = svg("defs", {});
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 8 8", refX: "8", refY: "4", markerWidth: "8", markerHeight: "8", orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", class: "arrowhead" }));
    defs.append(marker);
    root.append(defs);
    for (const [f, t] of edges) {
      const [x1, y1] = at.get(f), [x2, y2] = at.get(t);
      const sx = x1 + NODE_W, sy = y1 + NODE_H / 2, ex = x2, ey = y2 + NODE_H / 2, mx = (sx + ex) / 2;
      root.append(svg("path", {
        d: "M" + sx + "," + sy + " C" + mx + "," + sy + " " + mx + "," + ey + " " + ex + "," + ey,
        class: "edge" + (ENDED.has(stateOf(all.get(f))) ? " edge-bad" : ""), "marker-end": "url(#arrow)",
        "data-edge": f + "->" + t,
      }));
    }
    for (const t of nodes) {
      const id = String(t.id), s = stateOf(t);
      const [x, y] = at.get(id);
      const g = svg("g", { class: "node tstate-" + s, "data-node": id, transform: "translate(" + x + "," + y + ")" });
      g.addEventListener("click", () => focusTask(id));
      g.append(svg("rect", { width: NODE_W, height: NODE_H, rx: "5" }));
      const name = svg("text", { x: "6", y: "15", class: "nname" });
      const full = "#" + id + " " + title(t);
      name.textContent = full.length > 24 ? full.slice(0, 23) + "…" : full;
      const sub = svg("text", { x: "6", y: "31", class: "nstate" });
      sub.textContent = word(s) + (t.owner ? " · " + t.owner : "");
      const tip = svg("title", {});
      tip.textContent = full + " (" + word(s) + ")";
      g.append(tip, name, sub);
      root.append(g);
    }
    box.append(root);
  }

  // ---- actions -------------------------------------------------------------------------------
  function handed(r) {
    return (r.handedOver || []).filter((a) => a.action === "handed_over")
      .map((a) => "; handed task " + a.taskId + " to " + a.worker).join("");
  }

  async function retry(id) {
    say("retrying task " + id + "…");
    try {
      const r = await post("/api/task/retry", { team: B.team(), task: id });
      say("task " + r.task.id + " is queued again" + handed(r));
    } catch (e) {
      say("task " + id + " not retried: " + e.message, true);
    }
  }

  async function cancel(id, reason) {
    say("cancelling task " + id + "…");
    try {
      const r = await post("/api/task/cancel", { team: B.team(), task: id, reason });
      cancelOpen = null;
      drawn = null;
      say("cancelled task " + r.task.id + " (was " + r.was + ")" + (r.told ? "; told " + r.told + " to stop" : "") + handed(r));
      B.redraw();
    } catch (e) {
      say("task " + id + " not cancelled: " + e.message, true);
    }
  }

  async function merge(id, branch) {
    if (!confirm("Merge task " + id + "'s branch " + branch + " into your branch (checked first if it is not a fast-forward)?")) return;
    say("merging task " + id + "…");
    try {
      const r = await post("/api/merge", { team: B.team(), task: id });
      const rows = (r.results || []).map((x) => "task " + x.taskId + ": " + x.status + (x.message ? " (" + x.message + ")" : "")).join(", ");
      say("merge into " + r.target + ": " + (rows || "nothing to merge"));
    } catch (e) {
      say("task " + id + " not merged: " + e.message, true);
    }
  }

  $("add-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const team = B.team();
    if (!team) return;
    const body = { team, title: $("add-title").value, description: $("add-description").value };
    const blocked = $("add-blocked").value.split(/[\s,]+/).map((s) => s.replace(/^#/, "")).filter((s) => s);
    if (blocked.length) body.blockedBy = blocked;
    const agent = $("add-agent").value.trim();
    if (agent) body.agent = agent;
    const prio = $("add-priority").value.trim();
    if (prio) body.priority = /^[-+]?\d+$/.test(prio) ? Number(prio) : prio;
    try {
      const r = await post("/api/task/add", body);
      say("added task " + r.task.id + " to team " + r.team + handed(r));
      for (const f of ["add-title", "add-description", "add-blocked", "add-agent"]) $(f).value = "";
      $("add-priority").value = "0";
    } catch (e) {
      say("task not added: " + e.message, true);
    }
  });

  return { render, stateOf, reset: () => { drawn = null; cancelOpen = null; } };
};
