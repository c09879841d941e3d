// vhd review app: keyboard navigation and small conveniences. The pages work without this file.
(function () {
  "use strict";
  var page = document.body.getAttribute("data-page");

  function typing(ev) {
    var t = ev.target;
    if (t && t.tagName === "INPUT" && (t.type === "checkbox" || t.type === "radio")) return false;  // keys still label
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT");
  }

  function click(id) {
    var el = document.getElementById(id);
    if (el) { el.click(); return true; }
    return false;
  }

  // gallery: j/k (or arrows) move the focus across cards, Enter opens (a link's own behaviour)
  function cards() { return Array.prototype.slice.call(document.querySelectorAll("#grid .card a.open")); }
  function move(step) {
    var list = cards();
    if (!list.length) return;
    var i = list.indexOf(document.activeElement);
    i = i < 0 ? 0 : Math.min(list.length - 1, Math.max(0, i + step));
    list[i].focus();
  }

  // the takedown form asks once more before it is sent
  var removeForm = document.getElementById("remove-form");
  if (removeForm) {
    removeForm.addEventListener("submit", function (ev) {
      if (!window.confirm("Take this sample down? It leaves the gallery and every export.")) ev.preventDefault();
    });
  }

  document.addEventListener("keydown", function (ev) {
    if (typing(ev) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var k = ev.key;
    if (k === "u") { if (click("undo")) ev.preventDefault(); return; }
    if (k === "g") { window.location.href = "/"; return; }
    if (page === "gallery") {
      if (k === "j" || k === "ArrowRight" || k === "ArrowDown") { move(1); ev.preventDefault(); }
      else if (k === "k" || k === "ArrowLeft" || k === "ArrowUp") { move(-1); ev.preventDefault(); }
      else if (k === "ArrowRight" && click("next-page")) ev.preventDefault();
    } else if (page === "sample") {
      if (k === "y") { click("yes"); ev.preventDefault(); }
      else if (k === "n") { click("no"); ev.preventDefault(); }
      else if (k === "r") { click("reveal"); }
      else if (k === "ArrowRight" || k === "j") { click("next"); }
      else if (k === "ArrowLeft" || k === "k") { window.history.back(); }
    }
  });

  if (page === "gallery") {
    var first = cards()[0];
    if (first && document.activeElement === document.body) first.focus();
  }
})();
