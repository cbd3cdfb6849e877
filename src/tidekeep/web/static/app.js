// The dashboard's only script of its own: charts from data attributes, nothing inline (the page's
// Content-Security-Policy allows scripts from this server only). A <canvas data-chart="{...}"> holds a
// Chart.js configuration: {type, labels, datasets: [{label, data}], stacked?, xTitle?, yTitle?, bytes?}.
(function () {
  "use strict";
  var palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

  function humanBytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], i = 0, v = Math.abs(n);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (n < 0 ? "-" : "") + (i === 0 ? String(v) : v.toFixed(1) + " " + units[i]);
  }

  function draw(canvas) {
    if (canvas.dataset.drawn || typeof Chart === "undefined") { return; }
    var spec = JSON.parse(canvas.dataset.chart);
    canvas.dataset.drawn = "1";
    var datasets = spec.datasets.map(function (d, i) {
      return Object.assign({borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length],
                            pointRadius: spec.type === "line" ? 2 : 0, stepped: d.stepped || false}, d);
    });
    var tick = spec.bytes ? function (v) { return humanBytes(v); } : undefined;
    new Chart(canvas, {
      type: spec.type || "bar",
      data: {labels: spec.labels, datasets: datasets},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: {
          x: {stacked: !!spec.stacked, title: {display: !!spec.xTitle, text: spec.xTitle || ""}},
          y: {stacked: !!spec.stacked, beginAtZero: true, title: {display: !!spec.yTitle, text: spec.yTitle || ""},
              ticks: tick ? {callback: tick} : {}}
        },
        plugins: {legend: {display: datasets.length > 1},
                  tooltip: spec.bytes ? {callbacks: {label: function (c) {
                    return c.dataset.label + ": " + humanBytes(c.parsed.y); }}} : {}}
      }
    });
  }

  function drawAll(root) {
    (root || document).querySelectorAll("canvas[data-chart]").forEach(draw);
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawAll(document);
    if (window.htmx) { window.htmx.onLoad(drawAll); }
  });
})();
