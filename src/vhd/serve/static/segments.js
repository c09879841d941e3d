// vhd review app: a segmented video's segments and the reviewer's own harmful spans (sample page).
// After a reveal, "play" (or , and .) seeks the clear video to a segment's start and stops it at its
// end; Y / N decide the selected segment; [ and ] mark a new harmful span at the playing time.
// Without a reveal nothing plays (the server sends no clear video), but the forms still work.
(function () {
  "use strict";
  var spans = document.getElementById("human-spans");
  if (!spans) return;
  var list = document.getElementById("segment-list");
  var clip = document.getElementById("clip");
  var status = document.getElementById("span-status");
  var csrfField = document.querySelector('#span-form input[name="csrf"]');
  var csrf = csrfField ? csrfField.value : "";
  var base = spans.getAttribute("data-post");
  var query = spans.getAttribute("data-query");
  var items = list ? Array.prototype.slice.call(list.querySelectorAll("li[data-idx]")) : [];
  var selected = -1;
  var stopAt = null;
  var markStart = null;

  function say(text) { if (status) status.textContent = text; }
  function clock(s) { return s.toFixed(2) + " s"; }

  function select(i) {
    if (i < 0 || i >= items.length) return;
    items.forEach(function (li, k) {
      li.classList.toggle("selected", k === i);
      if (k === i) li.setAttribute("aria-current", "true"); else li.removeAttribute("aria-current");
    });
    selected = i;
  }

  function stopCheck() {
    if (!clip || stopAt === null) return;
    if (clip.currentTime >= stopAt) {
      clip.pause();
      clip.currentTime = Math.max(0, stopAt - 0.01);  // rest inside the segment, on its last moment
      stopAt = null;
      return;
    }
    if (!clip.paused) window.requestAnimationFrame(stopCheck);
  }

  function play(i) {
    select(i);
    if (!clip || selected < 0) return;
    var li = items[selected];
    var start = parseFloat(li.getAttribute("data-start"));
    stopAt = parseFloat(li.getAttribute("data-end"));
    clip.loop = false;
    clip.currentTime = start;
    var p = clip.play();
    if (p && p.then) p.then(function () { window.requestAnimationFrame(stopCheck); }, function () {});
    say("playing segment " + (selected + 1) + ": " + clock(start) + " to " + clock(stopAt));
  }
  if (clip) clip.addEventListener("timeupdate", stopCheck);

  function post(path, fields) {
    var body = new URLSearchParams(fields);
    body.set("csrf", csrf);
    return fetch(base + path + (query ? "?" + query : ""), {
      method: "POST", body: body, credentials: "same-origin", headers: { accept: "application/json" }
    }).then(function (r) {
      if (r.ok) return r.json();
      return r.text().then(function (t) { throw new Error(t); });
    }).then(function (data) { show(data.spans); say("saved"); return data; }, function (e) { say(String(e.message)); });
  }

  function show(rows) {
    while (spans.firstChild) spans.removeChild(spans.firstChild);
    var mine = {};
    rows.forEach(function (r) {
      if (r.segment_idx !== null) mine[r.segment_idx] = r.harmful;
      var li = document.createElement("li");
      li.setAttribute("data-id", String(r.id));
      li.className = r.harmful ? "d-yes" : "d-no";
      var label = document.createElement("span");
      label.className = "span-label";
      label.textContent = r.start_s.toFixed(2) + "-" + r.end_s.toFixed(2) + " s " + (r.harmful ? "harmful" : "not harmful") +
        " · " + (r.segment_idx === null ? "marked" : "segment " + (r.segment_idx + 1)) + " by " + r.reviewer;
      var remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "remove";
      remove.addEventListener("click", function () { post("/span/remove", { span_id: String(r.id) }); });
      li.appendChild(label);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(remove);
      spans.appendChild(li);
    });
    items.forEach(function (li, k) {
      var said = li.querySelector(".seg-mine");
      if (said && k in mine) said.textContent = mine[k] ? "you: harmful" : "you: not harmful";
    });
  }

  function decide(i, harmful) {
    if (i < 0) { say("select a segment first (, or .)"); return; }
    post("/segment", { idx: String(i), harmful: harmful ? "yes" : "no" });
  }

  // the forms post without reloading the page (a reload would log another reveal)
  items.forEach(function (li, k) {
    var form = li.querySelector("form");
    if (form) {
      form.addEventListener("submit", function (ev) {
        ev.preventDefault();
        var button = ev.submitter;
        select(k);
        if (button && button.value) decide(k, button.value === "yes");
      });
    }
    var button = li.querySelector(".seg-play");
    if (button) button.addEventListener("click", function () { play(k); });
  });
  spans.querySelectorAll("form.span-remove").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      post("/span/remove", { span_id: form.querySelector('input[name="span_id"]').value });
    });
  });

  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var k = ev.key;
    if (k === "." && items.length) { play(Math.min(items.length - 1, selected + 1)); ev.preventDefault(); }
    else if (k === "," && items.length) { play(Math.max(0, selected - 1)); ev.preventDefault(); }
    else if (k === "Y" || k === "N") { decide(selected, k === "Y"); ev.preventDefault(); }
    else if (k === "[" && clip) {
      markStart = clip.currentTime;
      say("span starts at " + clock(markStart) + ": press ] at its end");
      ev.preventDefault();
    } else if (k === "]" && clip) {
      if (markStart === null) { say("press [ at the span's start first"); ev.preventDefault(); return; }
      var start = markStart;
      markStart = null;
      post("/span", { start_s: start.toFixed(3), end_s: clip.currentTime.toFixed(3) });
      ev.preventDefault();
    }
  });
})();
