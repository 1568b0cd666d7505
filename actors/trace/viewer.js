// The trace viewer: draws the session embedded as JSON in #trace-data. Event content only
// ever reaches the page as text (textContent, title, CSSOM), never as markup.
"use strict";
(function () {
  const began = performance.now();
  const data = JSON.parse(document.getElementById("trace-data").textContent);
  const duration = Math.max(data.session.duration, 1);
  const KIND_NAMES = { turn: "turn", model: "model request", tool: "tool call", subagent: "subagent call" };
  const MARKS = {
    suspended: ["⏸", "suspended"], resumed: ["▶", "resumed"], steered: ["✎", "steered"],
    cancelled: ["✕", "cancelled"], error: ["!", "error"], recovered: ["↻", "recovered"],
    compacted: ["≡", "compacted"], custom: ["•", "user event"], fork: ["⑂", "fork point"],
  };
  const MAX_EVENTS_SHOWN = 400;
  const MAX_ZOOM = 4096;
  let zoom = 1;
  let selected = null;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  function pct(us) { return (100 * us / duration) + "%"; }

  function fmtDuration(us) {
    if (us < 1000) return us + " µs";
    if (us < 1e6) return Number((us / 1000).toPrecision(3)) + " ms";
    if (us < 60e6) return Number((us / 1e6).toPrecision(3)) + " s";
    if (us < 3600e6) return Math.floor(us / 60e6) + " min " + Math.round((us % 60e6) / 1e6) + " s";
    return Math.floor(us / 3600e6) + " h " + Math.round((us % 3600e6) / 60e6) + " min";
  }

  function fmtAt(us) {  // an offset as the absolute UTC time, to the microsecond
    const abs = data.session.t0 + us;
    const iso = new Date(Math.floor(abs / 1000)).toISOString();
    return iso.slice(0, 23) + String(abs % 1000).padStart(3, "0") + "Z";
  }

  function fmtCount(n) {
    if (n < 10000) return String(n);
    if (n < 1e6) return Number((n / 1000).toPrecision(3)) + "k";
    return Number((n / 1e6).toPrecision(3)) + "M";
  }

  function fmtUsage(u) {
    return fmtCount(u[0]) + " req · " + fmtCount(u[1]) + " in / " + fmtCount(u[2]) +
      " out tok · " + fmtCount(u[3]) + " tools";
  }

  // -- the header ---------------------------------------------------------------------------
  const session = data.session;
  document.getElementById("session-id").textContent = session.id;
  document.title = "actors trace " + session.id;
  document.getElementById("summary").textContent =
    "root " + session.root + " · " + data.lanes.length + " agents · " + session.events +
    " events · " + fmtDuration(session.duration) + (session.events ? " from " + fmtAt(0) : "") +
    " · total: " + fmtUsage(data.total);
  // Forks: where this session came from, and its branches, as links to their traces (the
  // files `actors trace` writes beside this one).
  function traceLink(id) {
    const link = el("a", "", id);
    link.href = "trace-" + id.replace(/[^\w.-]/g, "_") + ".html";
    return link;
  }
  const lineage = document.getElementById("lineage");
  if (session.forkedFrom) {
    lineage.append("forked from ", traceLink(session.forkedFrom[0]),
      " after its event " + session.forkedFrom[1]);
  }
  for (const [i, branch] of session.branches.entries()) {
    lineage.append(i === 0 ? (session.forkedFrom ? " · branches: " : "branches: ") : ", ",
      traceLink(branch[0]), " (after " + branch[1] + ")");
  }
  lineage.hidden = !session.forkedFrom && session.branches.length === 0;
  const legend = document.getElementById("legend");
  function group(name) { legend.append(el("li", "group", name)); }
  group("spans:");
  for (const kind of Object.keys(KIND_NAMES)) {
    const item = el("li");
    item.append(el("span", "bar k-" + kind), KIND_NAMES[kind]);
    legend.append(item);
  }
  group("ended:");
  for (const status of ["error", "cancelled", "interrupted", "suspended"]) {
    const item = el("li");
    item.append(el("span", "bar k-tool s-" + status), status);
    legend.append(item);
  }
  group("markers:");
  for (const kind of Object.keys(MARKS)) {
    const item = el("li");
    item.append(el("span", "marker m-" + kind, MARKS[kind][0]), MARKS[kind][1]);
    legend.append(item);
  }

  // -- lanes --------------------------------------------------------------------------------
  // Turns take row 0 with the markers; the other spans are packed first-fit into rows 1.. so
  // that parallel calls sit one under another.
  function packRows(spans) {
    const rowEnds = [];
    const rows = spans.map(function (span) {
      if (span[0] === "turn") return 0;
      let row = rowEnds.findIndex(function (end) { return end <= span[1]; });
      if (row < 0) { row = rowEnds.length; rowEnds.push(span[2]); } else rowEnds[row] = span[2];
      return row + 1;
    });
    return { rows: rows, count: rowEnds.length + 1 };
  }

  const lanesNode = document.getElementById("lanes");
  const laneNodes = {};
  const fragment = document.createDocumentFragment();
  data.lanes.forEach(function (lane, laneIndex) {
    const row = el("div", "lane");
    row.dataset.agent = lane.id;
    const label = el("div", "lane-label");
    label.style.paddingLeft = (8 + 16 * lane.depth) + "px";
    const id = el("div", "id");
    if (lane.depth) id.append(el("span", "depth", "└ "));
    id.append(lane.id);
    label.append(id, el("div", "meta", lane.name + " · " + lane.status),
      el("div", "meta", fmtUsage(lane.usage)));
    label.title = lane.id + " (" + lane.name + ")\nparent: " + (lane.parent || "none") +
      "\nstatus: " + lane.status + "\n" + fmtUsage(lane.usage);
    const track = el("div", "track");
    const packed = packRows(lane.spans);
    track.style.height = Math.max(packed.count, 2) * 20 + 4 + "px";
    lane.spans.forEach(function (span, i) {
      const bar = el("div", "bar k-" + span[0] + " s-" + span[4], span[3]);
      bar.style.left = pct(span[1]);
      bar.style.width = pct(span[2] - span[1]);
      bar.style.top = (2 + 20 * packed.rows[i]) + "px";
      bar.title = span[3] + "\n" + KIND_NAMES[span[0]] + " · " + span[4] + " · " +
        fmtDuration(span[2] - span[1]);
      bar.dataset.lane = laneIndex;
      bar.dataset.span = i;
      track.append(bar);
    });
    lane.markers.forEach(function (mark, i) {
      const node = el("div", "marker m-" + mark[0], MARKS[mark[0]][0]);
      node.style.left = pct(mark[1]);
      node.title = MARKS[mark[0]][1] + ": " + mark[2] + "\n+" + fmtDuration(mark[1]);
      node.dataset.lane = laneIndex;
      node.dataset.marker = i;
      track.append(node);
    });
    row.append(label, track);
    laneNodes[lane.id] = row;
    fragment.append(row);
  });
  lanesNode.append(fragment);
  document.getElementById("empty").hidden = session.events > 0;

  // -- the time axis and zoom ----------------------------------------------------------------
  const timeline = document.getElementById("timeline");
  const axis = document.getElementById("axis");

  function labelWidth() {
    return parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--label"));
  }

  function trackWidth() {
    return Math.max(timeline.clientWidth - labelWidth() - 24, 200) * zoom;
  }

  function drawAxis() {  // ticks for the visible stretch only: a deep zoom is millions of px
    axis.replaceChildren();
    const width = trackWidth();
    const wanted = Math.max(duration * 110 / width, 1);  // about one tick per 110 px
    const magnitude = Math.pow(10, Math.floor(Math.log10(wanted)));
    const step = [1, 2, 5, 10].map(function (m) { return m * magnitude; })
      .find(function (s) { return s >= wanted; });
    const from = Math.max(timeline.scrollLeft - labelWidth(), 0) * duration / width;
    const to = (timeline.scrollLeft + timeline.clientWidth) * duration / width;
    for (let t = Math.floor(from / step) * step; t <= Math.min(to, duration); t += step) {
      const tick = el("div", "tick");
      tick.style.left = pct(t);
      tick.append(el("span", "", "+" + fmtDuration(Math.round(t))));
      axis.append(tick);
    }
  }

  function setZoom(next, anchorX) {
    const before = trackWidth();
    const anchor = anchorX === undefined ? timeline.clientWidth / 2 : anchorX;
    const at = (timeline.scrollLeft + anchor - labelWidth()) / before;
    zoom = Math.min(Math.max(next, 1), MAX_ZOOM);
    document.documentElement.style.setProperty("--tw", trackWidth() + "px");
    timeline.scrollLeft = at * trackWidth() - anchor + labelWidth();
    drawAxis();
  }

  document.getElementById("zoom-in").addEventListener("click", function () { setZoom(zoom * 2); });
  document.getElementById("zoom-out").addEventListener("click", function () { setZoom(zoom / 2); });
  document.getElementById("zoom-fit").addEventListener("click", function () { setZoom(1); });
  timeline.addEventListener("wheel", function (event) {
    if (!event.ctrlKey && !event.metaKey) return;
    event.preventDefault();
    const x = event.clientX - timeline.getBoundingClientRect().left;
    setZoom(zoom * (event.deltaY < 0 ? 1.25 : 0.8), x);
  }, { passive: false });
  window.addEventListener("resize", function () { setZoom(zoom); });
  let axisQueued = false;
  timeline.addEventListener("scroll", function () {
    if (axisQueued) return;
    axisQueued = true;
    requestAnimationFrame(function () { axisQueued = false; drawAxis(); });
  });

  // -- details ------------------------------------------------------------------------------
  const eventsBySeq = {};
  function eventOf(laneIndex, seq) {
    if (!eventsBySeq[laneIndex]) {
      const map = new Map();
      for (const event of data.lanes[laneIndex].events) map.set(event[0], event);
      eventsBySeq[laneIndex] = map;
    }
    return eventsBySeq[laneIndex].get(seq);
  }

  function seqsOf(ranges) {
    const seqs = [];
    for (let i = 0; i < ranges.length; i += 2) {
      for (let s = ranges[i]; s <= ranges[i + 1]; s++) seqs.push(s);
    }
    return seqs;
  }

  const details = document.getElementById("details");

  function fact(list, name, value) {
    list.append(el("dt", "", name));
    const dd = el("dd");
    if (value instanceof Node) dd.append(value); else dd.textContent = value;
    list.append(dd);
  }

  // Binary parts of messages, as the page data holds them: no base64 but an embedded
  // thumbnail's, which the media table keeps once by hash (see actors/trace/_media.py).
  function partsOf(value, found) {
    if (Array.isArray(value)) {
      for (const item of value) partsOf(item, found);
    } else if (value && typeof value === "object") {
      if (typeof value.sha256 === "string" && typeof value.placeholder === "string") {
        found.push(value);
      } else {
        for (const key of Object.keys(value)) partsOf(value[key], found);
      }
    }
    return found;
  }

  function partsView(parts) {
    const box = el("div", "parts");
    for (const part of parts) {
      const url = part.thumbnail ? (data.media || {})[part.thumbnail] : undefined;
      if (typeof url === "string" && url.startsWith("data:image/")) {
        const img = el("img", "thumbnail");
        img.alt = part.placeholder;
        img.title = part.placeholder;
        img.src = url;
        box.append(img);
      } else {
        box.append(el("span", "part-placeholder", part.placeholder));
      }
    }
    return box;
  }

  function showDetails(laneIndex, title, facts, seqs, node) {
    const lane = data.lanes[laneIndex];
    if (selected) selected.classList.remove("selected");
    selected = node;
    node.classList.add("selected");
    document.querySelectorAll(".lane.highlight").forEach(function (n) {
      n.classList.remove("highlight");
    });
    document.getElementById("details-title").textContent = title;
    const list = document.getElementById("details-facts");
    list.replaceChildren();
    fact(list, "agent", lane.id + " (" + lane.name + ")");
    for (const pair of facts) fact(list, pair[0], pair[1]);
    const events = document.getElementById("details-events");
    events.replaceChildren();
    seqs.slice(0, MAX_EVENTS_SHOWN).forEach(function (seq) {
      const event = eventOf(laneIndex, seq);
      if (!event) return;
      const item = el("li");
      const head = el("div", "event-head");
      head.append(el("span", "seq", "#" + event[0]), el("span", "type", event[1]),
        el("span", "at", "+" + fmtDuration(event[2])));
      head.title = fmtAt(event[2]);
      item.append(head, el("pre", "payload", JSON.stringify(event[3], null, 2)));
      const parts = partsOf(event[3], []);
      if (parts.length) item.append(partsView(parts));
      events.append(item);
    });
    if (seqs.length > MAX_EVENTS_SHOWN) {
      events.append(el("li", "more", (seqs.length - MAX_EVENTS_SHOWN) + " more events not shown"));
    }
    if (details.hidden) {  // make room beside the timeline: the panel never hides a bar
      details.hidden = false;
      document.body.classList.add("details-open");
      setZoom(zoom);
    }
  }

  function childLink(childId) {
    const link = el("a", "child", childId);
    link.addEventListener("click", function () {
      const row = laneNodes[childId];
      if (!row) return;
      row.classList.add("highlight");
      row.scrollIntoView({ block: "nearest" });
    });
    return link;
  }

  lanesNode.addEventListener("click", function (event) {
    const node = event.target.closest(".bar, .marker");
    if (!node) return;
    const laneIndex = Number(node.dataset.lane);
    const lane = data.lanes[laneIndex];
    if (node.dataset.span !== undefined) {
      const span = lane.spans[Number(node.dataset.span)];
      const seqs = seqsOf(span[5]);
      const facts = [
        ["kind", KIND_NAMES[span[0]]], ["status", span[4]],
        ["start", "+" + fmtDuration(span[1]) + "  (" + fmtAt(span[1]) + ")"],
        ["duration", fmtDuration(span[2] - span[1])], ["events", String(seqs.length)],
      ];
      if (span[6]) facts.push(["child", childLink(span[6])]);
      showDetails(laneIndex, span[3], facts, seqs, node);
      if (span[6] && laneNodes[span[6]]) laneNodes[span[6]].classList.add("highlight");
    } else {
      const mark = lane.markers[Number(node.dataset.marker)];
      showDetails(laneIndex, MARKS[mark[0]][1] + ": " + mark[2],
        [["at", "+" + fmtDuration(mark[1]) + "  (" + fmtAt(mark[1]) + ")"]], [mark[3]], node);
    }
  });

  function closeDetails() {
    if (details.hidden) return;
    details.hidden = true;
    document.body.classList.remove("details-open");
    setZoom(zoom);
    if (selected) selected.classList.remove("selected");
    selected = null;
  }
  document.getElementById("details-close").addEventListener("click", closeDetails);
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") closeDetails();
  });

  // -- usage --------------------------------------------------------------------------------
  const body = document.querySelector("#usage tbody");
  function usageRow(cells, className) {
    const tr = el("tr", className);
    for (const cell of cells) tr.append(el("td", "", cell));
    body.append(tr);
  }
  for (const lane of data.lanes) {
    usageRow([lane.id, lane.name, lane.status].concat(lane.usage));
  }
  usageRow(["total", "", ""].concat(data.total), "total");

  setZoom(1);
  void lanesNode.offsetHeight;  // lay the page out now, so that the time below includes it
  const took = performance.now() - began;
  window.traceRenderMs = took;
  document.getElementById("footnote").textContent =
    "Times are the events' created_at, offset from the first event. Parallel tool calls " +
    "end together: their results are logged in call order once the step settles. " +
    "Drawn in " + took.toFixed(0) + " ms.";
  document.body.dataset.rendered = "true";
}());
