// Helpers shared by tensorsmith's pages (the report page, the diff page), placed before each
// page's own script: number formatting and element creation. Hand-written, no dependencies.
var tsPage = (function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  function grouped(n) {
    return n === null || n === undefined ? "" : Number(n).toLocaleString("en-US");
  }
  // A finite number, short: integers grouped, the rest to four significant digits.
  function finite(x) {
    if (Number.isInteger(x) && Math.abs(x) < 1e15) return grouped(x);
    var a = Math.abs(x);
    return a !== 0 && (a < 1e-3 || a >= 1e6) ? x.toExponential(3) : x.toPrecision(4);
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) if (attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  return { grouped: grouped, finite: finite, el: el, svg: svg };
})();
