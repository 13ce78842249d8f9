// omp board: the page. Everything a worker or a peer wrote is put into the page as text
// (textContent, never HTML), so markup or escape sequences in it show as what they are.
"use strict";

(function () {
  const TOKEN = document.querySelector('meta[name="omp-board-token"]').content;
  let team = document.querySelector('meta[name="omp-board-team"]').content || null;
  const S = {}; // the sections as last received
  let source = null;
  let diffOpen = null; // {worker, data, file}
  const SCREEN_ROWS = 24;

  // ---- small helpers -------------------------------------------------------------------------
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = String(v);
      else if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
    return e;
  }
  function svg(tag, attrs) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }
  const $ = (id) => document.getElementById(id);
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function num(n) { return typeof n === "number" ? n.toLocaleString("en-US") : "–"; }
  function time(iso) { return typeof iso === "string" ? iso.slice(11, 19) : ""; }
  function stateClass(s) { return "state state-" + String(s || "").replace(/\s+/g, "-"); }

  function say(text, bad) {
    const n = $("notice");
    n.textContent = text;
    n.className = "notice" + (bad ? " bad" : "");
  }

  async function post(path, body) {
    const res = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-OMP-Board-Token": TOKEN },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    let data = null;
    try { data = await res.json(); } catch (e) { data = { ok: false, message: res.statusText }; }
    if (!res.ok || !data || data.ok === false) {
      const why = (data && (data.message || data.error)) || res.statusText;
      throw new Error(why + (data && data.error ? " [" + data.error + "]" : ""));
    }
    return data;
  }

  // ---- the stream ------------------------------------------------------------------------------
  function connect() {
    if (source) source.close();
    for (const k of Object.keys(S)) delete S[k];
    const q = team ? "?team=" + encodeURIComponent(team) : "";
    source = new EventSource("/api/stream" + q);
    $("conn").textContent = "connecting…";
    source.addEventListener("open", () => { $("conn").textContent = "live"; });
    source.addEventListener("error", () => { $("conn").textContent = "reconnecting…"; });
    source.addEventListener("reset", (e) => {
      for (const k of Object.keys(S)) delete S[k];
      apply(JSON.parse(e.data), true);
    });
    source.addEventListener("update", (e) => apply(JSON.parse(e.data), false));
    source.addEventListener("error", (e) => {
      if (e.data) say("board error: " + JSON.parse(e.data).message, true);
    });
  }

  function apply(changed, reset) {
    let screens = false;
    for (const [k, v] of Object.entries(changed)) {
      if (k === "events" && !reset && !v.reset) {
        const old = (S.events && S.events.events) || [];
        S.events = { events: old.concat(v.events).slice(-200) };
      } else {
        S[k] = v;
      }
    }
    const keys = Object.keys(changed);
    if (reset || keys.includes("teams")) renderTeams();
    if (reset || keys.includes("monitor")) renderMonitor();
    if (reset || keys.includes("status") || keys.includes("states")) { renderStatus(); renderTasks(); }
    for (const k of keys) {
      if (k.startsWith("screen:")) { renderScreen(k.slice(7)); screens = true; }
    }
    if (reset) renderScreens();
    if (reset || screens || keys.includes("status") || keys.includes("states")) renderNeeds();
    if (reset || keys.includes("mail")) renderMail();
    if (reset || keys.includes("events")) renderEvents();
    if (reset || keys.includes("usage")) renderUsage();
  }

  // ---- teams and the monitor ---------------------------------------------------------------
  function renderTeams() {
    const list = $("teams");
    clear(list);
    const rows = S.teams || [];
    if (!team && rows.length) {
      const live = rows.find((t) => !t.shutdown && !t.error) || rows[0];
      choose(live.team);
      return;
    }
    for (const t of rows) {
      const sub = t.error ? "unreadable" : (t.shutdown ? "shut down" : "live") + ", " + t.workers + " x " + (t.agent || "?");
      const b = el("button", {
        type: "button",
        "aria-current": t.team === team ? "true" : "false",
        onclick: () => choose(t.team),
      }, el("span", { text: t.team }), el("span", { class: "sub", text: sub }));
      list.append(el("li", {}, b));
    }
    if (!rows.length) list.append(el("li", { text: "no teams in this project" }));
  }

  function choose(name) {
    team = name;
    diffOpen = null;
    T.reset();
    $("diff-section").hidden = true;
    const url = new URL(location.href);
    url.searchParams.set("team", name);
    history.replaceState(null, "", url.pathname + url.search);
    connect();
  }

  function renderMonitor() {
    const m = S.monitor;
    const n = $("monitor");
    if (!m) { n.textContent = "monitor: none ran here"; return; }
    let text = "monitor: " + (m.state || "?");
    if (m.stateWhy) text += " (" + m.stateWhy + ")";
    if (m.lastScanAt) text += ", last scan " + time(m.lastScanAt);
    n.textContent = text;
  }

  // ---- status: workers, tasks ----------------------------------------------------------------
  function status() { return S.status || {}; }

  function renderStatus() {
    const st = status();
    $("team-title").textContent = team ? "Team " + team : "No team chosen";
    let note = "";
    if (st.error) note = "unreadable: " + st.message + " [" + st.error + "]";
    else if (st.team) {
      note = (st.running ? "running" : "not running" + (st.notRunning ? ": " + st.notRunning : ""));
      if (st.agent) note += " · agent " + st.agent;
      if (typeof st.leaderUnread === "number") note += " · leader unread " + st.leaderUnread;
    }
    $("team-note").textContent = note;
    const body = $("workers").tBodies[0];
    clear(body);
    const states = S.states || {};
    for (const w of st.workers || []) {
      const s = states[w.name] || "…";
      const ws = w.workspace || {};
      let branch = ws.branch || (ws.kind === "shared" ? "shared checkout" : "");
      if (typeof ws.commitsAhead === "number") branch += " · " + ws.commitsAhead + " ahead";
      if (ws.merged === true) branch += " · merged";
      if (ws.pending) branch += " · reading…";
      const task = (st.tasks || []).find((t) => t.id === w.taskId);
      if (!ws.branch && task && task.branch && ["in_progress", "verifying"].includes(task.state)) branch = task.branch + " (task " + task.id + ")";
      const taskText = w.taskId ? "#" + w.taskId + (task ? " " + T.stateOf(task).replace(/_/g, " ") : "") : "";
      const usage = w.usage || {};
      const tokens = typeof usage.total === "number" ? num(usage.total) : (usage.unreadable ? "not read" : "–");
      const actions = el("div", { class: "options" });
      if (ws.branch) {
        actions.append(el("button", { type: "button", text: "Diff", "aria-label": "Diff of " + w.name, onclick: () => openDiff({ worker: w.name }) }));
        if (ws.merged !== true && ws.commitsAhead) {
          actions.append(el("button", { type: "button", text: "Merge", "aria-label": "Merge " + w.name + "'s branch", onclick: () => merge(w.name) }));
        }
      }
      actions.append(el("button", { type: "button", text: "Message", "aria-label": "Message " + w.name, onclick: () => messageTo(w.name) }));
      body.append(el("tr", { "data-worker": w.name },
        el("th", { scope: "row", text: w.name }),
        el("td", {}, el("span", { class: stateClass(s), text: s })),
        el("td", { text: taskText, title: task && task.description ? task.description : null }),
        el("td", { text: branch }),
        el("td", { text: tokens }),
        el("td", { text: String(w.unread ?? "") }),
        el("td", {}, actions)));
    }
    const to = $("send-to");
    const keep = to.value;
    clear(to);
    to.append(el("option", { value: "*", text: "everyone (broadcast)" }));
    for (const w of st.workers || []) to.append(el("option", { value: w.name, text: w.name }));
    if (keep) to.value = keep;
  }

  // The task board and graph, and the backlog's actions: tasks.js.
  const T = window.OmpTasks({
    el, svg, $, clear, post, say,
    team: () => team,
    openDiff: (which) => openDiff(which),
    redraw: () => renderTasks(),
  });

  function renderTasks() { T.render(status(), team); }

  // ---- screens and prompts -------------------------------------------------------------------
  function renderScreens() {
    const box = $("screens");
    clear(box);
    for (const w of (status().workers || [])) if (S["screen:" + w.name]) renderScreen(w.name);
    for (const k of Object.keys(S)) if (k.startsWith("screen:")) renderScreen(k.slice(7));
  }

  function renderScreen(worker) {
    const sc = S["screen:" + worker];
    if (!sc) return;
    const box = $("screens");
    let fig = box.querySelector('figure[data-worker="' + CSS.escape(worker) + '"]');
    if (!fig) {
      fig = el("figure", { class: "screen", "data-worker": worker },
        el("figcaption", {}), el("pre", { tabindex: "0", "aria-label": worker + "'s screen" }));
      box.append(fig);
    }
    const s = (S.states || {})[worker] || sc.screen || sc.pane;
    const cap = fig.querySelector("figcaption");
    clear(cap);
    cap.append(el("strong", { text: worker }), " ", el("span", { class: stateClass(s), text: s }));
    if (sc.pane !== "alive") cap.append(" · pane " + sc.pane);
    const pre = fig.querySelector("pre");
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = (sc.lines || []).slice(-SCREEN_ROWS * 2).join("\n");
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function renderNeeds() {
    const box = $("needs");
    clear(box);
    const rows = {};
    for (const w of status().workers || []) rows[w.name] = w;
    const names = new Set(Object.keys(rows));
    for (const k of Object.keys(S)) if (k.startsWith("screen:")) names.add(k.slice(7));
    let any = false;
    for (const worker of [...names].sort()) {
      const sc = S["screen:" + worker] || {};
      const need = (rows[worker] || {}).needsYou;
      const prompt = sc.prompt;
      if (!prompt && !need) continue;
      any = true;
      const what = prompt ? prompt.what : need.what;
      const lines = prompt ? prompt.lines : (need.lines || []);
      const card = el("div", { class: "needs-card", role: "group", "aria-label": worker + " needs you", "data-worker": worker },
        el("strong", { text: worker + " needs you: " + what }),
        el("pre", { text: lines.join("\n") }));
      if (prompt && prompt.options.length) {
        const opts = el("div", { class: "options" });
        for (const o of prompt.options) {
          opts.append(el("button", {
            type: "button",
            text: o.number + ". " + o.label,
            "aria-label": "Answer " + worker + ": " + o.number + ". " + o.label,
            onclick: (ev) => answer(worker, o, prompt, ev.currentTarget),
          }));
        }
        card.append(opts);
      } else {
        const attach = need && need.attach;
        card.append(el("p", { class: "note", text: "No options omp can choose here" + (attach ? "; attach: " + attach : "; attach to its pane") }));
      }
      box.append(card);
    }
    $("needs-section").hidden = !any;
  }

  async function answer(worker, option, prompt, button) {
    for (const b of button.parentNode.querySelectorAll("button")) b.disabled = true;
    say("answering " + worker + ": " + option.number + ". " + option.label + "…");
    try {
      const r = await post("/api/answer", { team, worker, choice: option.number, prompt: prompt.promptId });
      say(worker + ": chose " + r.choice.number + ". " + r.choice.label + " (" + r.keys.join(" ") + "); the prompt is gone");
    } catch (e) {
      say(worker + ": not answered: " + e.message, true);
      for (const b of button.parentNode.querySelectorAll("button")) b.disabled = false;
    }
  }

  // ---- actions -------------------------------------------------------------------------------
  function messageTo(worker) {
    $("send-to").value = worker;
    $("send-body").focus();
  }

  $("send-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const to = $("send-to").value;
    const body = $("send-body").value;
    if (!team || !body.trim()) return;
    try {
      const r = await post("/api/send", { team, to, body });
      const who = to === "*" ? "everyone (" + (r.recipients || []).join(", ") + ")" : to;
      say("sent to " + who + (r.nudge ? "; nudge: " + r.nudge : ""));
      $("send-body").value = "";
    } catch (e) {
      say("not sent: " + e.message, true);
    }
  });

  async function merge(worker) {
    if (!confirm("Merge " + worker + "'s branch into your branch (its check first)?")) return;
    say("merging " + worker + "…");
    try {
      const r = await post("/api/merge", { team, worker });
      const rows = (r.results || []).map((x) => x.worker + ": " + x.status).join(", ");
      say("merge into " + r.target + ": " + (rows || "nothing to merge") + ((r.skipped || []).length ? "; skipped: " + r.skipped.map((s) => s.worker + " (" + s.why + ")").join(", ") : ""));
    } catch (e) {
      say("not merged: " + e.message, true);
    }
  }

  // ---- the diff ------------------------------------------------------------------------------
  async function openDiff(which) {
    const name = which.task !== undefined ? "task " + which.task : which.worker;
    say("reading " + name + "'s diff…");
    const q = which.task !== undefined ? "&task=" + encodeURIComponent(which.task) : "&worker=" + encodeURIComponent(which.worker);
    let data;
    try {
      const res = await fetch("/api/diff?team=" + encodeURIComponent(team) + q, { credentials: "same-origin" });
      data = await res.json();
      if (!res.ok || data.ok === false) throw new Error((data.message || res.statusText) + (data.error ? " [" + data.error + "]" : ""));
    } catch (e) {
      say("no diff: " + e.message, true);
      return;
    }
    say("");
    diffOpen = { worker: which.worker, task: which.task, name, data, file: data.files.length ? data.files[0].path : null };
    renderDiff();
    $("diff-section").hidden = false;
    $("h-diff").focus();
  }

  $("diff-close").addEventListener("click", () => {
    $("diff-section").hidden = true;
    diffOpen = null;
  });

  function renderDiff() {
    const d = diffOpen.data;
    $("h-diff").textContent = "Diff of " + diffOpen.name;
    let head = (d.branch || "") + " against " + (d.target || "?") + ": " + (d.stat || "no change") +
      (d.merged ? " · merged" : "") + (d.uncommitted.length ? " · uncommitted: " + d.uncommitted.join(", ") : "") + (d.error ? " · " + d.error : "");
    if (diffOpen.task !== undefined) {
      head += d.commentTo ? " · comments go to " + d.commentTo + ", which holds it" : " · " + d.commentWhy;
    }
    $("diff-head").textContent = head;
    const commits = $("diff-commits");
    clear(commits);
    for (const c of d.commits) commits.append(el("li", { text: c.sha + " " + c.subject }));
    const files = $("diff-files");
    clear(files);
    for (const f of d.files) {
      files.append(el("li", {}, el("button", {
        type: "button",
        "aria-current": f.path === diffOpen.file ? "true" : "false",
        text: f.path + " (+" + f.added + " -" + f.deleted + ")",
        onclick: () => { diffOpen.file = f.path; renderDiff(); },
      })));
    }
    const box = $("diff-file");
    clear(box);
    const f = d.files.find((x) => x.path === diffOpen.file);
    if (!f) { box.append(el("p", { class: "note", text: "no file changed" })); return; }
    const table = el("table", { class: "diff", "aria-label": "Diff of " + f.path });
    const tbody = el("tbody", {});
    table.append(tbody);
    if (f.binary) tbody.append(el("tr", {}, el("td", { colspan: "4", text: "binary file" })));
    for (const h of f.hunks) {
      tbody.append(el("tr", { class: "hunk" }, el("td", { colspan: "4", text: h.header })));
      for (const ln of h.lines) {
        const cell = el("td", { class: "num" });
        if (ln.new !== null) {
          cell.append(el("button", {
            type: "button", class: "c", text: "+",
            "aria-label": "Comment on " + f.path + " line " + ln.new,
            onclick: (ev) => commentForm(ev.currentTarget.closest("tr"), f.path, ln.new),
          }));
        }
        tbody.append(el("tr", { class: ln.kind, "data-line": ln.new ?? "" },
          cell,
          el("td", { class: "num", text: ln.old ?? "" }),
          el("td", { class: "num", text: ln.new ?? "" }),
          el("td", { text: (ln.kind === "add" ? "+" : ln.kind === "del" ? "-" : " ") + ln.text })));
      }
    }
    if (f.cut) tbody.append(el("tr", {}, el("td", { colspan: "4", text: f.cut + " more lines not shown" })));
    box.append(table);
  }

  function commentForm(row, path, line) {
    const old = document.querySelector(".comment-row");
    if (old) old.remove();
    const id = "comment-" + line;
    const text = el("textarea", { id, rows: "3", required: true });
    const form = el("form", { class: "comment-form" },
      el("label", { for: id, text: "Comment on " + path + " line " + line + " (mailed to " + (diffOpen.task !== undefined ? (diffOpen.data.commentTo || "the worker holding task " + diffOpen.task) : diffOpen.worker) + ")" }),
      text,
      el("div", { class: "options" },
        el("button", { type: "submit", text: "Send the comment" }),
        el("button", { type: "button", text: "Cancel", onclick: () => { tr.remove(); } })));
    const tr = el("tr", { class: "comment-row" }, el("td", { colspan: "4" }, form));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (!text.value.trim()) return;
      try {
        const who = diffOpen.task !== undefined ? { task: diffOpen.task } : { worker: diffOpen.worker };
        const r = await post("/api/comment", { team, ...who, path, line, text: text.value });
        say("comment on " + path + " line " + line + " sent to " + (r.worker || diffOpen.worker) + (r.nudge ? "; nudge: " + r.nudge : ""));
        tr.remove();
      } catch (e) {
        say("comment not sent: " + e.message, true);
      }
    });
    row.after(tr);
    text.focus();
  }

  // ---- mail, events, usage -------------------------------------------------------------------
  function renderMail() {
    const ol = $("mail");
    clear(ol);
    for (const m of (S.mail || []).slice().reverse()) {
      ol.append(el("li", { "data-id": m.id },
        el("span", { text: time(m.at) + "  " + m.from + " → " + m.to + (m.intent ? " [" + m.intent + "]" : "") + (m.delivered ? "" : " (unread)") }),
        el("pre", { class: "body", text: m.body })));
    }
    if (!(S.mail || []).length) ol.append(el("li", { text: "no mail yet" }));
  }

  function renderEvents() {
    const ol = $("events");
    clear(ol);
    for (const e of ((S.events && S.events.events) || []).slice().reverse()) ol.append(el("li", { text: e.text }));
  }

  const COLORS = ["#2563eb", "#059669", "#d97706", "#dc2626", "#7c3aed", "#0891b2", "#65a30d", "#db2777"];

  function renderUsage() {
    const u = S.usage || {};
    const b = $("budget");
    clear(b);
    const line = "workers together: " + num(u.total) + " tokens";
    b.append(el("p", { text: line }));
    if ((u.notCounted || []).length) {
      b.append(el("p", { class: "note", text: "not read for " + u.notCounted.join(", ") + " (no session record of its agent found)" }));
    }
    if (u.budget && typeof u.budget.tokens === "number") {
      const used = u.budget.used || 0;
      b.append(el("label", { for: "budget-meter", text: "Team budget: " + num(used) + " of " + num(u.budget.tokens) + " (" + (u.budget.percent ?? 0) + "%) " }),
        el("meter", { id: "budget-meter", min: "0", max: String(u.budget.tokens), value: String(Math.min(used, u.budget.tokens)), high: String(u.budget.tokens * 0.8) }));
    } else {
      b.append(el("p", { class: "note", text: "no team budget set" }));
    }
    if (u.workerBudget) b.append(el("p", { class: "note", text: "each worker's budget: " + num(u.workerBudget) }));
    drawChart(u.series || [], u.workerBudget);
  }

  function drawChart(series, workerBudget) {
    const box = $("chart");
    clear(box);
    const W = 640, H = 200, P = 36;
    const names = [...new Set(series.flatMap((p) => Object.keys(p[1])))].sort();
    const root = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
      "aria-label": "Tokens per worker over time: " + names.map((n) => n + " " + num(series.length ? series[series.length - 1][1][n] : 0)).join(", ") });
    box.append(root);
    if (!series.length || !names.length) {
      const t = svg("text", { x: P, y: H / 2, fill: "#475569" });
      t.textContent = "no token usage read yet";
      root.append(t);
      return;
    }
    const t0 = series[0][0], t1 = Math.max(series[series.length - 1][0], t0 + 1000);
    let max = 1;
    for (const p of series) for (const v of Object.values(p[1])) max = Math.max(max, v);
    if (workerBudget) max = Math.max(max, workerBudget);
    const x = (t) => P + ((t - t0) / (t1 - t0)) * (W - P - 8);
    const y = (v) => H - P + 8 - (v / max) * (H - P - 8);
    root.append(svg("line", { x1: P, y1: H - P + 8, x2: W - 8, y2: H - P + 8, stroke: "#94a3b8" }));
    root.append(svg("line", { x1: P, y1: 8, x2: P, y2: H - P + 8, stroke: "#94a3b8" }));
    const top = svg("text", { x: 2, y: 16, "font-size": "10", fill: "#475569" });
    top.textContent = num(max);
    root.append(top);
    if (workerBudget) {
      root.append(svg("line", { x1: P, y1: y(workerBudget), x2: W - 8, y2: y(workerBudget), stroke: "#b91c1c", "stroke-dasharray": "4 3" }));
    }
    names.forEach((n, i) => {
      const pts = [];
      for (const p of series) if (typeof p[1][n] === "number") pts.push(x(p[0]).toFixed(1) + "," + y(p[1][n]).toFixed(1));
      if (pts.length === 1) pts.push((W - 8) + "," + pts[0].split(",")[1]);
      root.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": "2" }));
    });
    const legend = el("ul", { class: "legend", "aria-label": "Legend" });
    names.forEach((n, i) => {
      const sw = el("span", { class: "swatch" });
      sw.style.background = COLORS[i % COLORS.length];
      const last = series[series.length - 1][1][n];
      legend.append(el("li", {}, sw, n + ": " + num(last)));
    });
    box.append(legend);
  }

  connect();
})();
