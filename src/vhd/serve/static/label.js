// vhd review app: fast labelling. Category hotkeys, zoom and pan of a revealed image, the
// instructions panel, selecting cards for a bulk label, saved views. Every form works without it.
(function () {
  "use strict";
  var page = document.body.getAttribute("data-page");

  function typing(t) {
    if (!t || !t.tagName) return false;
    if (t.tagName === "TEXTAREA" || t.tagName === "SELECT") return true;
    return t.tagName === "INPUT" && t.type !== "checkbox" && t.type !== "radio";
  }

  // ---- instructions: `i` opens and closes the panel (or the page), Escape closes it
  var guide = document.getElementById("guide");
  var guideFrom = null;
  function toggleGuide(open) {
    if (!guide) { window.location.href = "/instructions"; return; }
    if (open === undefined) open = guide.hidden;
    guide.hidden = !open;
    if (open) { guideFrom = document.activeElement; guide.focus(); }
    else if (guideFrom && guideFrom.focus) { guideFrom.focus(); }
  }
  var guideLink = document.getElementById("instructions-link");
  if (guideLink && guide && !guide.classList.contains("guide-page")) {
    guideLink.addEventListener("click", function (ev) { ev.preventDefault(); toggleGuide(); });
  }

  // ---- zoom and pan of the revealed image(s): +/- or the wheel zoom, drag or arrows (focused) pan, z resets
  var views = [];
  function View(img, single) {
    var box = document.createElement("div");
    box.className = "zoom" + (single ? " single" : "");
    box.tabIndex = 0;
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", (img.getAttribute("alt") || "image") + "; + and - zoom, arrows or drag pan, z resets");
    img.parentNode.insertBefore(box, img);
    box.appendChild(img);
    var v = { box: box, img: img, s: 1, x: 0, y: 0 };
    function fit() {
      if (!img.naturalWidth) return;
      box.style.aspectRatio = img.naturalWidth + " / " + img.naturalHeight;
      box.style.maxWidth = "calc(60vh * " + (img.naturalWidth / img.naturalHeight).toFixed(4) + ")";  // the form stays in view
      // a small image is scaled up to the frame; keep its pixels sharp rather than smeared
      box.classList.toggle("small", img.naturalWidth * 4 <= box.clientWidth);
    }
    if (img.complete) fit(); else img.addEventListener("load", fit);
    box.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var r = box.getBoundingClientRect();
      zoom(v, ev.deltaY < 0 ? 1.25 : 0.8, ev.clientX - r.left, ev.clientY - r.top);
    }, { passive: false });
    var drag = null;
    box.addEventListener("pointerdown", function (ev) {
      drag = { x: ev.clientX - v.x, y: ev.clientY - v.y };
      box.setPointerCapture(ev.pointerId);
    });
    box.addEventListener("pointermove", function (ev) {
      if (!drag) return;
      v.x = ev.clientX - drag.x; v.y = ev.clientY - drag.y; draw(v);
    });
    box.addEventListener("pointerup", function () { drag = null; });
    box.addEventListener("keydown", function (ev) {
      var step = 40, moves = { ArrowLeft: [step, 0], ArrowRight: [-step, 0], ArrowUp: [0, step], ArrowDown: [0, -step] };
      if (moves[ev.key] && v.s > 1) {
        v.x += moves[ev.key][0]; v.y += moves[ev.key][1]; draw(v);
        ev.preventDefault(); ev.stopPropagation();  // the page's arrow keys (next, back) wait
      }
    });
    return v;
  }
  function draw(v) {
    var w = v.box.clientWidth, h = v.box.clientHeight;
    v.x = Math.min(0, Math.max(w - w * v.s, v.x));  // never pan past an edge
    v.y = Math.min(0, Math.max(h - h * v.s, v.y));
    v.img.style.transform = "translate(" + v.x + "px, " + v.y + "px) scale(" + v.s + ")";
    v.box.classList.toggle("zoomed", v.s > 1);
    v.box.setAttribute("data-scale", v.s.toFixed(2));
  }
  function zoom(v, by, cx, cy) {
    var s = Math.min(8, Math.max(1, v.s * by));
    if (cx === undefined) { cx = v.box.clientWidth / 2; cy = v.box.clientHeight / 2; }
    v.x = cx - (cx - v.x) * (s / v.s);  // the point under the cursor stays put
    v.y = cy - (cy - v.y) * (s / v.s);
    v.s = s;
    draw(v);
  }
  function focusedView() {
    for (var i = 0; i < views.length; i++) if (views[i].box === document.activeElement) return views[i];
    return views[0];
  }
  if (page === "sample") {
    var clear = document.querySelectorAll(".media img.clear");
    for (var i = 0; i < clear.length; i++) views.push(View(clear[i], clear.length === 1));
  }

  // ---- gallery: select cards (click the box, shift for a range, ctrl/cmd-click a card, x on a card)
  var lastPick = null;
  function picks() { return Array.prototype.slice.call(document.querySelectorAll("#grid input.pick")); }
  function counted() {
    var n = picks().filter(function (p) { return p.checked; }).length;
    var out = document.getElementById("picked");
    if (out) out.textContent = n + " selected";
    picks().forEach(function (p) { p.closest(".card").classList.toggle("picked", p.checked); });
    return n;
  }
  function pick(box, range, value) {
    var list = picks();
    if (range && lastPick && list.indexOf(lastPick) >= 0) {
      var a = list.indexOf(lastPick), b = list.indexOf(box);
      for (var i = Math.min(a, b); i <= Math.max(a, b); i++) list[i].checked = value;
    } else {
      box.checked = value;
    }
    lastPick = box;
    counted();
  }
  if (page === "gallery") {
    picks().forEach(function (box) {
      box.addEventListener("click", function (ev) { pick(box, ev.shiftKey, box.checked); });
    });
    var grid = document.getElementById("grid");
    if (grid) {
      grid.addEventListener("click", function (ev) {
        var link = ev.target.closest && ev.target.closest("a.open");
        if (!link || !(ev.ctrlKey || ev.metaKey || ev.shiftKey)) return;
        ev.preventDefault();  // with a modifier a click selects instead of opening
        var box = link.closest(".card").querySelector("input.pick");
        pick(box, ev.shiftKey, ev.shiftKey ? true : !box.checked);
      });
    }
    var all = document.getElementById("pick-all");
    if (all) {
      all.hidden = false;
      all.addEventListener("click", function () {
        var list = picks(), on = !list.every(function (p) { return p.checked; });
        list.forEach(function (p) { p.checked = on; });
        counted();
      });
    }
    counted();
    var bulk = document.getElementById("bulk-form");
    if (bulk) {
      bulk.addEventListener("submit", function (ev) {
        var scope = document.getElementById("bulk-scope");
        if (scope && scope.value === "view" && !window.confirm("Label every sample of this view?")) ev.preventDefault();
      });
    }
  }

  // ---- saved views: a name for the gallery's current URL, kept in this browser
  var KEY = "vhd.views";
  function saved() {
    try { return JSON.parse(window.localStorage.getItem(KEY) || "[]"); } catch (e) { return []; }
  }
  function showViews() {
    var list = document.getElementById("saved-views");
    if (!list) return;
    list.textContent = "";
    saved().forEach(function (v, k) {
      var li = document.createElement("li"), a = document.createElement("a"), rm = document.createElement("button");
      a.href = v.url; a.textContent = v.name;
      rm.type = "button"; rm.textContent = "×"; rm.setAttribute("aria-label", "forget view " + v.name);
      rm.addEventListener("click", function () {
        var all = saved(); all.splice(k, 1); window.localStorage.setItem(KEY, JSON.stringify(all)); showViews();
      });
      li.appendChild(a); li.appendChild(document.createTextNode(" ")); li.appendChild(rm); list.appendChild(li);
    });
  }
  var saveForm = document.getElementById("save-view");
  if (saveForm && window.localStorage) {
    saveForm.hidden = false;
    saveForm.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var name = document.getElementById("view-name").value.trim();
      var link = document.getElementById("view-link");
      if (!name || !link) return;
      var all = saved().filter(function (v) { return v.name !== name; });
      all.push({ name: name, url: link.getAttribute("href") });
      window.localStorage.setItem(KEY, JSON.stringify(all));
      document.getElementById("view-name").value = "";
      showViews();
    });
    showViews();
  }

  // ---- keys
  document.addEventListener("keydown", function (ev) {
    if (typing(ev.target) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var k = ev.key;
    if (k === "i") { toggleGuide(); ev.preventDefault(); return; }
    if (k === "Escape" && guide && !guide.hidden && !guide.classList.contains("guide-page")) { toggleGuide(false); return; }
    if (page === "sample") {
      var box = /^[0-9a-z]$/.test(k) ? document.querySelector('#categories input[data-key="' + k + '"]') : null;
      if (box) { box.checked = !box.checked; ev.preventDefault(); return; }
      if (views.length && (k === "+" || k === "=")) { zoom(focusedView(), 1.5); ev.preventDefault(); }
      else if (views.length && k === "-") { zoom(focusedView(), 1 / 1.5); ev.preventDefault(); }
      else if (views.length && k === "z") { var v = focusedView(); v.s = 1; v.x = 0; v.y = 0; draw(v); ev.preventDefault(); }
    } else if (page === "gallery") {
      var card = document.activeElement && document.activeElement.closest && document.activeElement.closest(".card");
      if ((k === "x" || k === "X") && card) { var p = card.querySelector("input.pick"); pick(p, ev.shiftKey, !p.checked); ev.preventDefault(); }
      else if ((k === "y" || k === "n") && counted() > 0) {
        document.getElementById(k === "y" ? "bulk-yes" : "bulk-no").click();
        ev.preventDefault();
      }
    }
  });
})();
