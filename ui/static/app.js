// Chiffon's dashboard script: every page works without it; with it a task's page
// follows the task's event stream (progress, step, state, and the output tail,
// kept to its last 64 KiB), a batch's page the batch's (each agent's state,
// progress and task), each reloads once its approval is decided; a workflow
// run's page follows the run's (its graph and steps, drawn by the server at
// each change) until the run ends; the home page refreshes its lists, and the submit and schedule forms show the
// parameters' inputs of the work type chosen. A task's page also keeps its
// steps and its time so far up to date, and its output box at the last line
// unless the reader scrolled up.
"use strict";
(function () {
  const TAIL = 64 * 1024;

  // goDuration writes ms as Go's time.Duration does, to the second: "1h2m3s".
  function goDuration(ms) {
    let s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) { return s + "s"; }
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s %= 60;
    return (h ? h + "h" + m + "m" : m + "m") + s + "s";
  }

  // agoText says how long before now (ms) a time was, as the server's pages do.
  function agoText(ms) {
    const s = Math.floor(Math.max(0, ms) / 1000);
    if (s < 60) { return s + "s ago"; }
    if (s < 3600) { return Math.floor(s / 60) + "m ago"; }
    return Math.floor(s / 3600) + "h ago";
  }

  // tickElapsed shows the task's time so far each second, on the server's clock
  // (the page says when it was made), until stop is called with the end.
  function tickElapsed() {
    const el = document.getElementById("elapsed");
    if (!el || el.dataset.end) { return function () {}; }
    const start = Date.parse(el.dataset.start);
    const skew = Date.parse(el.dataset.now) - Date.now();
    const show = function (end) { el.textContent = goDuration(end - start); };
    const timer = setInterval(function () { show(Date.now() + skew); }, 1000);
    return function (end) { clearInterval(timer); show(end); };
  }

  // showStep shows a status's step in the steps list: the step of its number
  // changes, or a new one is added at the end, as the server keeps them.
  function showStep(st, at) {
    const list = document.getElementById("steps");
    if (!list || !st.step || !st.step.name) { return; }
    const n = String(st.step.number);
    let li = Array.from(list.children).find(function (e) { return e.dataset.number === n; });
    if (!li) {
      li = document.createElement("li");
      li.dataset.number = n;
      const status = document.createElement("span"), name = document.createElement("span"), time = document.createElement("time");
      name.className = "step-name"; time.className = "muted";
      li.append(status, " ", name, " ", time);
      list.append(li);
      document.getElementById("steps-section").hidden = false;
    }
    const status = li.querySelector(".step-status") || li.querySelector("span");
    status.className = "step-status " + st.status; status.textContent = st.status;
    li.querySelector(".step-name").textContent = st.step.name;
    const time = li.querySelector("time");
    time.dateTime = at; time.title = at; time.textContent = agoText(Date.now() - Date.parse(at));
  }

  // followOutput keeps the output box at its last line, on load and as output
  // comes, unless the reader scrolled up: it follows again once they are back
  // at the bottom. It returns what to call after output is added.
  function followOutput(out) {
    if (!out) { return function () {}; }
    let follow = true;
    const atBottom = function () { return out.scrollTop + out.clientHeight >= out.scrollHeight - 4; };
    out.scrollTop = out.scrollHeight;
    out.addEventListener("scroll", function () { follow = atBottom(); });
    return function () { if (follow) { out.scrollTop = out.scrollHeight; } };
  }

  function followTask(el, grew) {
    const out = document.getElementById("output");
    const bar = document.getElementById("progress");
    const pct = document.getElementById("percent");
    const step = document.getElementById("step");
    const state = document.getElementById("state");
    const stopElapsed = tickElapsed();
    let shownEnd = Number(el.dataset.tailEnd || 0); // the output's bytes shown end here
    const enc = new TextEncoder();
    const src = new EventSource(el.dataset.events); // it resumes with Last-Event-ID
    const onEvent = function (msg) {
      let ev;
      try { ev = JSON.parse(msg.data); } catch (e) { return; }
      if (ev.state) {
        state.textContent = ev.state;
        state.className = "state " + ev.state;
      }
      const st = ev.status;
      if (st) {
        bar.value = st.progress_percent; bar.textContent = st.progress_percent + "%";
        pct.textContent = st.progress_percent + "%";
        if (st.step && st.step.name) { step.textContent = st.step.name; }
        showStep(st, ev.at);
        const text = st.step && st.step.output;
        if (text && ev.output_offset !== undefined) {
          const bytes = enc.encode(text);
          const end = ev.output_offset + bytes.length;
          if (end > shownEnd) {
            const from = Math.max(0, shownEnd - ev.output_offset);
            out.textContent += new TextDecoder().decode(bytes.subarray(from));
            shownEnd = end;
            if (out.textContent.length > TAIL * 2) { out.textContent = out.textContent.slice(-TAIL); }
            grew();
          }
        }
      }
      // A decision on its approval, or an end: the server's page shows it.
      const decided = el.dataset.awaiting === "true" && ev.state && ev.state !== "awaiting_approval";
      const ended = ev.type === "result" || ["succeeded", "failed", "cancelled", "error", "rejected"].includes(ev.state);
      if (ended) { stopElapsed(Date.parse(ev.at)); }
      if (decided || ended) {
        src.close();
        setTimeout(function () { location.reload(); }, 300); // the result, from the server
      }
    };
    for (const type of ["state", "status", "result", "error", "retry"]) { src.addEventListener(type, onEvent); }
  }

  function setState(span, state) {
    span.textContent = state;
    span.className = "state " + state;
  }

  // followBatch shows each "batch" event (the whole batch) in the page's rows,
  // and reloads the page once the batch's end is stored.
  function followBatch(el) {
    const script = JSON.parse(el.dataset.script || "{}");
    const notes = script.notes || {};
    const order = script.order || [];
    const src = new EventSource(el.dataset.events);
    src.addEventListener("batch", function (msg) {
      let b;
      try { b = JSON.parse(msg.data); } catch (e) { return; }
      setState(document.getElementById("batch-state"), b.state);
      const counts = document.getElementById("batch-counts");
      const states = order.filter(function (s) { return b.counts && b.counts[s] > 0; })
        .concat(Object.keys(b.counts || {}).sort().filter(function (s) { return !order.includes(s) && b.counts[s] > 0; }));
      counts.replaceChildren();
      states.forEach(function (s, i) {
        if (i) { counts.append(", "); }
        const span = document.createElement("span");
        setState(span, s);
        span.textContent = b.counts[s] + " " + s;
        counts.append(span);
      });
      for (const t of b.targets || []) {
        const row = el.querySelector('tr[data-agent="' + CSS.escape(t.agent_id) + '"]');
        if (!row) { continue; }
        setState(row.querySelector('[data-field="state"]'), t.state);
        const started = !!t.task_id && t.state !== "waiting" && t.state !== "skipped";
        const bar = row.querySelector("progress");
        const pct = row.querySelector(".pct");
        bar.value = t.progress_percent; bar.textContent = t.progress_percent + "%"; bar.hidden = !started;
        pct.textContent = t.progress_percent + "%"; pct.hidden = !started;
        const link = row.querySelector("a.task");
        if (link) { link.hidden = !started; }
        const note = row.querySelector(".note");
        note.textContent = started ? "" : (notes[t.state] || "");
        note.hidden = started;
      }
      if (b.finished_at || (el.dataset.awaiting === "true" && b.state !== "awaiting_approval")) {
        src.close();
        setTimeout(function () { location.reload(); }, 300); // the finished batch, from the server
      }
    });
  }

  // followRun shows each "run" event, the run's page's live part as the server
  // draws it for the run at that change, in place of each part that changed
  // (a part unchanged stays, with a note being typed in it), until the run ends.
  function followRun(el) {
    const src = new EventSource(el.dataset.events);
    src.addEventListener("run", function (msg) {
      const fresh = new DOMParser().parseFromString(msg.data, "text/html").getElementById("run-live");
      if (!fresh) { return; }
      for (const part of Array.from(fresh.children)) {
        const shown = part.id ? document.getElementById(part.id) : null;
        if (shown && shown.outerHTML !== part.outerHTML) { shown.replaceWith(document.adoptNode(part)); }
      }
      el.dataset.final = fresh.dataset.final;
      if (fresh.dataset.final === "true") { src.close(); }
    });
  }

  function refresh(el) {
    const every = Number(el.dataset.refresh) * 1000;
    setInterval(function () {
      fetch(location.href, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(function (html) {
        const doc = new DOMParser().parseFromString(html, "text/html");
        for (const id of ["approvals", "counters"]) {
          const fresh = doc.getElementById(id);
          if (fresh) { document.getElementById(id).replaceWith(fresh); }
        }
        const fresh = doc.querySelector("[data-refresh]");
        if (fresh) { el.innerHTML = fresh.innerHTML; }
      }).catch(function () {});
    }, every);
  }

  // followChoice shows, when another work type is chosen, its description and
  // its parameters' inputs, from the server's form for it; the values typed in
  // the JSON box and the hints stay. Only the latest choice's answer is shown.
  function followChoice(form) {
    const pick = document.getElementById("target");
    document.getElementById("choose").hidden = true; // for browsers without this script
    let asked = 0;
    pick.addEventListener("change", function () {
      const n = ++asked;
      const url = new URL(form.dataset.choose, location.href);
      if (pick.value) { url.searchParams.set("target", pick.value); }
      fetch(url, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(function (html) {
        if (n !== asked) { return; }
        const doc = new DOMParser().parseFromString(html, "text/html");
        for (const id of ["problem", "work-about", "param-inputs"]) { // a refusal shown before goes
          const fresh = doc.getElementById(id);
          const shown = document.getElementById(id);
          if (shown && fresh) { shown.replaceWith(fresh); } else if (shown) { shown.remove(); }
        }
        history.replaceState(null, "", url);
      }).catch(function () {});
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    const task = document.getElementById("task");
    const grew = followOutput(document.getElementById("output"));
    if (task && task.dataset.final !== "true") { followTask(task, grew); }
    const batch = document.getElementById("batch");
    if (batch && batch.dataset.final !== "true") { followBatch(batch); }
    const run = document.getElementById("run-live");
    if (run && run.dataset.final !== "true") { followRun(run); }
    const r = document.querySelector("[data-refresh]");
    if (r) { refresh(r); }
    const choice = document.querySelector("form[data-choose]");
    if (choice) { followChoice(choice); }
  });
})();
