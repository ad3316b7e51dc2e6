// A differential flame graph: each node is as wide as the mean of its
// shares of the two profiles' totals; its colour says how its share
// changed from before to after: red grew, blue shrank, the deeper the
// more (relative to the largest change of any frame), near white barely.
const DIFF = JSON.parse(document.getElementById("diff-data").textContent);
const DELTA = DIFF.nodes.map((n) => n.after - n.before);
const MAX_DELTA = DELTA.reduce((m, d, i) => (i > 0 ? Math.max(m, Math.abs(d)) : m), 0) || 1;
const percent = (share) => (100 * share).toFixed(2) + "%";
fillOf = (node) => {
  const t = Math.min(1, Math.abs(DELTA[node]) / MAX_DELTA);
  const mix = (from, to) => Math.round(from + (to - from) * t);
  // From a pale grey to red (#dc2828) or blue (#2850dc).
  return DELTA[node] >= 0
    ? "rgb(" + mix(238, 220) + "," + mix(238, 40) + "," + mix(238, 40) + ")"
    : "rgb(" + mix(238, 40) + "," + mix(238, 80) + "," + mix(238, 220) + ")";
};
describe = (node) => {
  const n = DIFF.nodes[node];
  const sign = DELTA[node] > 0 ? "+" : DELTA[node] < 0 ? "−" : "±";
  return n.name + " — before " + percent(n.before) + ", after " + percent(n.after) + ", change " + sign +
    (100 * Math.abs(DELTA[node])).toFixed(2) + " points";
};
summary = () => "before " + DIFF.before.total + " " + DIFF.units + ", after " + DIFF.after.total + " " + DIFF.units +
  " (width: the mean of both shares; red grew, blue shrank)";
