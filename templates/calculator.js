// The fit page's calculator (generator/report/calculator.py): the tables' rules, in the reader's browser.
// Bytes are BigInt, so that the chord and the search are the integer arithmetic of generator/store/fit_table.py
// and generator/answers/fit.py; the two products Python does in floating point (the process model, the margin) are
// the same IEEE operations here, rounded half to even as Python's round() does.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("calculator-data").textContent);
  var GIB = 1073741824n;
  var $ = function (id) { return document.getElementById(id); };

  function roundHalfEven(x) {
    var down = Math.floor(x), rest = x - down;
    if (rest > 0.5 || (rest === 0.5 && down % 2 !== 0)) { return down + 1; }
    return down;
  }
  function floorDiv(a, b) {
    var q = a / b;
    return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
  }
  function chord(batches, values, batch) {  // the segment whose end is at or past the batch, else the last
    var i = 0;
    while (i < batches.length - 2 && batch > batches[i + 1]) { i += 1; }
    var b1 = batches[i], b2 = batches[i + 1], t1 = values[i], t2 = values[i + 1];
    return t1 + floorDiv((t2 - t1) * (batch - b1), b2 - b1);
  }
  function peakFunction(curve, target) {
    var batches = curve.batches.map(BigInt), tensor = curve.tensor.map(BigInt), cuda = curve.cuda.map(BigInt);
    if (target === "gpu") {  // the reserve with its allowance, rounded up (answers/published.py allowed)
      var ppm = BigInt(curve.allowance), million = BigInt(data.ppm);
      return function (batch) { return -floorDiv(-chord(batches, cuda, batch) * ppm, million) + BigInt(data.context); };
    }
    return function (batch) {
      return BigInt(roundHalfEven(Number(chord(batches, tensor, batch)) * (1 + data.proportional) + data.fixed));
    };
  }
  function big(a, b) { return a > b ? a : b; }
  function small(a, b) { return a < b ? a : b; }
  function interpolate(fits, fitsPeak, tooBig, tooBigPeak, usable) {  // generator/answers/fit.py _interpolate
    var guess;
    if (tooBigPeak !== null && tooBigPeak > fitsPeak) {
      guess = fits + floorDiv((usable - fitsPeak) * (tooBig - fits), tooBigPeak - fitsPeak);
    } else {
      guess = tooBigPeak === null ? small(fits * 2n, floorDiv(fits + tooBig, 2n)) : floorDiv(fits + tooBig, 2n);
    }
    return small(big(guess, fits + 1n), tooBig - 1n);
  }
  function largestBatch(peak, usable, limit) {  // generator/answers/fit.py largest_batch, step for step
    if (limit < 2n || peak(2n) > usable) { return peak(1n) <= usable ? 1n : 0n; }
    var fits = 2n, tooBig = limit + 1n;
    if (limit >= 3n) {
      var slope = big(peak(3n) - peak(2n), 1n);
      var first = small(big(2n + floorDiv(usable - peak(2n), slope), 3n), limit);
      if (peak(first) <= usable) { fits = first; } else { tooBig = first; }
      if (fits === first && first < limit && peak(first + 1n) > usable) { tooBig = first + 1n; }
    }
    var halve = false;
    while (tooBig - fits > 1n) {
      var width = tooBig - fits;
      var guess = halve ? floorDiv(fits + tooBig, 2n)
        : interpolate(fits, peak(fits), tooBig, tooBig <= limit ? peak(tooBig) : null, usable);
      if (peak(guess) <= usable) { fits = guess; } else { tooBig = guess; }
      halve = tooBig - fits > floorDiv(width, 2n);
    }
    return fits;
  }
  function onSimulated(curve, peak, batch, usable) {  // generator/answers/fit.py on_simulated
    var best = 0n;
    curve.batches.map(BigInt).forEach(function (b) {
      if (b <= batch && b > best && peak(b) <= usable) { best = b; }
    });
    return best;
  }
  function gib(bytes, digits) {  // Python's f"{bytes / 2**30:,.{digits}f} GiB": exact, ties to even
    var scaled = bytes * (10n ** BigInt(digits)), whole = scaled / GIB, rest = scaled % GIB;
    if (2n * rest > GIB || (2n * rest === GIB && whole % 2n === 1n)) { whole += 1n; }
    var text = whole.toString().padStart(digits + 1, "0");
    var head = text.slice(0, text.length - digits).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return head + (digits ? "." + text.slice(text.length - digits) : "") + " GiB";
  }
  function gibAbove(bytes, limit) {  // generator/units.py format_gib_above
    for (var digits = 1; digits < 4; digits += 1) {
      if (bytes <= limit || gib(bytes, digits) !== gib(limit, digits)) { return gib(bytes, digits); }
    }
    return bytes.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",") + " bytes";
  }
  function answer(curve, budget, target) {
    var peak = peakFunction(curve, target), limit = BigInt(curve.limit);
    var usable = BigInt(roundHalfEven(Number(budget) * (1 - data.margins[target])));  // answers/fit.py usable_bytes
    var batch = largestBatch(peak, usable, limit);
    if (target === "gpu") { batch = onSimulated(curve, peak, batch, usable); }  // a reserve is not convex
    var shown = batch > 0n ? batch : 1n, last = BigInt(curve.batches[curve.batches.length - 1]);
    var text = batch === 0n
      ? "does not fit: " + gibAbove(peak(shown), usable).replace(/ GiB$/, "") + " > " + gib(usable, 1)
      : "batch " + batch + " (" + gib(peak(shown), 1) + ")";
    if (batch === limit) { text += ", the tool's limit"; }  // generator/report/fit_first.py cell
    if (batch > 0n && batch >= last && last < limit) {  // past the simulated curve: no answer read from it
      text = "beyond the simulated curve (its largest batch, " + last + ", takes " + gib(peak(last), 1) +
        "): ask memory-budget fit --budget for this budget";
      batch = 0n;
    }
    return {batch: batch, bytes: peak(shown), usable: usable, text: text};
  }

  function option(select, value, label) {
    var item = document.createElement("option");
    item.value = value;
    item.textContent = label;
    select.appendChild(item);
  }
  function models() {
    var seen = [];
    data.curves.forEach(function (c) { if (seen.indexOf(c.model) < 0) { seen.push(c.model); } });
    return seen;
  }
  function fillLengths() {  // the lengths recorded for the model, the tables' first where it has it
    var select = $("calc-seq"), chosen = select.value || String(data.seq_len), seen = [];
    select.textContent = "";
    data.curves.forEach(function (c) {
      if (c.model === $("calc-model").value && seen.indexOf(c.seq) < 0) { seen.push(c.seq); }
    });
    seen.sort(function (a, b) { return a - b; })
      .forEach(function (n) { option(select, String(n), n.toLocaleString("en-US") + " tokens"); });
    select.value = chosen;
    if (!select.value && select.options.length) { select.selectedIndex = 0; }
  }
  function fillKinds() {
    var select = $("calc-kind"), chosen = select.value;
    select.textContent = "";
    data.curves.filter(function (c) { return c.model === $("calc-model").value && String(c.seq) === $("calc-seq").value; })
      .forEach(function (c) { option(select, c.kind, c.kind); });
    if (chosen) { select.value = chosen; }
    if (!select.value && select.options.length) { select.selectedIndex = 0; }
  }
  function budgetBytes() {
    if ($("calc-card").value !== "typed") { return BigInt($("calc-card").value) * GIB; }
    var typed = Number($("calc-typed").value);
    return typed >= data.typed[0] && typed <= data.typed[1] ? BigInt(Math.round(typed * 1073741824)) : null;
  }
  function update() {
    var curve = data.curves.filter(function (c) {
      return c.model === $("calc-model").value && c.kind === $("calc-kind").value &&
        String(c.seq) === $("calc-seq").value;
    })[0];
    var budget = budgetBytes(), out = $("calc-answer"), target = $("calc-target").value;
    if (!curve || budget === null) {
      out.textContent = "Type a budget between " + data.typed[0].toLocaleString("en-US") + " and " +
        data.typed[1].toLocaleString("en-US") + " GiB.";
      out.removeAttribute("data-batch");
      return;
    }
    var found = answer(curve, budget, target);
    out.textContent = curve.model + ", " + curve.kind + ", " + curve.seq.toLocaleString("en-US") +
      " tokens, in " + gib(budget, 2) + (target === "gpu" ? " on a GPU (simulated): " : " on this CPU machine: ") +
      found.text + ".";
    out.dataset.batch = found.batch.toString();
    out.dataset.bytes = found.bytes.toString();
    out.dataset.usable = found.usable.toString();
    out.dataset.budget = budget.toString();
    out.dataset.text = found.text;
    $("calc-recipe").textContent = curve.recipe ? curve.kind + ": " + curve.recipe + "." : "";
  }

  models().forEach(function (name) { option($("calc-model"), name, name); });
  data.cards.forEach(function (gibs) { option($("calc-card"), String(gibs), gibs + " GiB"); });
  option($("calc-card"), "typed", "another size…");
  $("calc-card").value = String(data.card);
  $("calc-typed").min = $("calc-typed").step = String(data.typed[0]);
  $("calc-typed").max = String(data.typed[1]);
  $("calc-typed").value = String(data.card);
  fillLengths();
  fillKinds();
  $("calc-model").addEventListener("change", function () { fillLengths(); fillKinds(); update(); });
  $("calc-seq").addEventListener("change", function () { fillKinds(); update(); });
  $("calc-card").addEventListener("change", function () {  // a card listed: its size in the box too
    if ($("calc-card").value !== "typed") { $("calc-typed").value = $("calc-card").value; }
  });
  $("calc-typed").addEventListener("input", function () { $("calc-card").value = "typed"; });  // typed: the box rules
  ["calc-kind", "calc-card", "calc-target", "calc-typed"].forEach(function (id) {
    $(id).addEventListener("input", update);
    $(id).addEventListener("change", update);
  });
  $("calculator").hidden = false;
  update();
}());
