// vhd review app: a reveal that lasts N seconds, then the sample is hidden again (settings: "reveal for").
// The page states the level in force; a reveal is per sample and never carried to the next one.
(function () {
  "use strict";
  var media = document.getElementById("media");
  if (!media) return;
  var hideUrl = media.getAttribute("data-hide-url");
  var seconds = parseInt(media.getAttribute("data-reveal-for") || "0", 10);
  function hide() { if (hideUrl) window.location.replace(hideUrl); }
  if (seconds > 0) window.setTimeout(hide, seconds * 1000);
  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "h" && document.getElementById("hide")) { ev.preventDefault(); hide(); }
  });
})();
