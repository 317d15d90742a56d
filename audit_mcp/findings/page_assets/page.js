/* The audit page: drawn from the JSON block beside this script. Every text that came from the repository or a
   reviewer goes in as a text node or an attribute value, never as markup (the page's policy makes the
   HTML-parsing sinks throw), with control and bidirectional characters shown as escapes. */
(() => {
  "use strict";
  const LIVE = document.documentElement.dataset.live === "1";
  // Spelled in two pieces: the markup that opens or closes a script element must not appear in this script.
  const DATA_OPEN = "<" + 'script type="application/json" id="audit-data">';
  const DATA_CLOSE = "<" + "/script>";
  const SEVERITIES = ["critical", "high", "medium", "low", "info"];
  const STATUSES = ["reproduced", "confirmed", "overstated", "likely", "disputed", "unverified", "not_reproduced",
    "false_positive"];
  const CONFIDENCES = ["high", "medium", "low"];
  const ROWS_AT_ONCE = 500; // findings drawn before "show more"
  const WHOLE_MAP_ROWS = 1500; // a map with fewer rows than this opens whole
  const FIRST_VIEW_ROWS = 150; // a larger one opens directories breadth-first up to about this many rows
  const REFRESH_MS = 5000;
  const ROW_PX = 24; // the height of a map row (page.css: .grid .row)

  // Text ---------------------------------------------------------------------------------------------------
  const CONTROL_ANY = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const CONTROL_KEEP_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  const NAMED = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  const shownChar = (c) => NAMED[c] || (c.charCodeAt(0) < 256
    ? "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0")
    : "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  const line = (s) => String(s ?? "").replace(CONTROL_ANY, shownChar); // one line, every control shown
  const block = (s) => String(s ?? "").replace(CONTROL_KEEP_LINES, shownChar); // keeps tabs and line ends
  const plural = (n, one, many) => `${n.toLocaleString("en")} ${n === 1 ? one : many || one + "s"}`;
  const words = (s) => line(s).replace(/_/g, " ");

  /** An element: attributes are set as values (never parsed), children appended as nodes or text. */
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "on") for (const [type, fn] of Object.entries(v)) e.addEventListener(type, fn);
      else if (k === "data") Object.assign(e.dataset, v);
      else if (k === "style") Object.assign(e.style, v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }
  const code = (s) => el("code", null, line(s));
  const pre = (s) => el("pre", null, block(s));
  const at = (file, start, end) => code(`${file}:${start}${end && end !== start ? "-" + end : ""}`);
  const sev = (s) => el("span", { class: `sev ${SEVERITIES.includes(s) ? s : ""}` }, line(s));
  const statusChip = (s) => el("span", { class: `status ${STATUSES.includes(s) ? s : ""}` }, words(s));
  const rank = (list, v) => (list.indexOf(v) < 0 ? list.length : list.indexOf(v));

  // State --------------------------------------------------------------------------------------------------
  let doc = null;
  let dataText = "";
  let tree = null;
  const ui = {
    hiddenSeverities: new Set(), lens: "", category: "", status: "", path: "",
    sort: { key: "severity", dir: 1 }, open: new Set(), rows: ROWS_AT_ONCE,
    expanded: null, gapsOnly: false, mapPath: "",
  };

  // The map's tree -----------------------------------------------------------------------------------------
  function buildTree(map) {
    const L = map.lenses.length;
    const S = map.states.length;
    // Open or failed: what the map's "only what is not reviewed yet or failed" keeps (the states say which).
    const gapCodes = new Set(map.states.map((s, i) => (s.group === "gap" || s.group === "open" ? i : -1)).filter((i) => i >= 0));
    const node = (path) => ({
      path, name: path.slice(path.lastIndexOf("/") + 1), kids: [], files: [], parent: null,
      counts: new Int32Array(L * S), gaps: 0, rows: 1,
    });
    const dirs = map.dirs.map(node);
    const byPath = new Map(dirs.map((d) => [d.path, d]));
    if (!byPath.has("")) byPath.set("", node(""));
    const root = byPath.get("");
    for (const d of dirs) {
      if (d.path === "") continue;
      const parent = byPath.get(d.path.includes("/") ? d.path.slice(0, d.path.lastIndexOf("/")) : "");
      d.parent = parent;
      parent.kids.push(d);
      for (let a = parent; a; a = a.parent) a.rows += 1;
    }
    for (const [dirIndex, name, units, reason] of map.files) {
      const dir = dirs[dirIndex];
      const file = {
        dir, name, units, reason, path: dir.path ? `${dir.path}/${name}` : name,
        counts: new Int32Array(L * S), gaps: reason === undefined ? 0 : 1,
      };
      for (const unit of units) {
        const codes = unit[2];
        for (let l = 0; l < codes.length; l++) {
          if (codes[l] === ".") continue;
          const s = parseInt(codes[l], 36);
          file.counts[l * S + s] += 1;
          if (gapCodes.has(s)) file.gaps += 1;
        }
      }
      dir.files.push(file);
      const rows = 1 + (units.length > 1 ? units.length : 0);
      for (let a = dir; a; a = a.parent) {
        for (let i = 0; i < file.counts.length; i++) a.counts[i] += file.counts[i];
        a.gaps += file.gaps;
        a.rows += rows;
      }
    }
    return root;
  }

  /** The map opens whole when it is small; else directories open breadth-first while the rows stay few. */
  function firstExpansion(root) {
    const open = new Set();
    if (root.rows <= WHOLE_MAP_ROWS) {
      const walk = (d) => {
        open.add("d:" + d.path);
        d.kids.forEach(walk);
        d.files.forEach((f) => f.units.length > 1 && open.add("f:" + f.path));
      };
      walk(root);
      return open;
    }
    open.add("d:");
    let shown = 1 + root.kids.length + root.files.length;
    const queue = [...root.kids];
    while (queue.length) {
      const d = queue.shift();
      const more = d.kids.length + d.files.length;
      if (shown + more > FIRST_VIEW_ROWS) break;
      open.add("d:" + d.path);
      shown += more;
      queue.push(...d.kids);
    }
    return open;
  }

  function stateCounts(counts, lens) {
    const S = doc.map.states.length;
    return doc.map.states.map((s, i) => counts[lens * S + i]);
  }

  function totalsByState(counts) {
    const L = doc.map.lenses.length;
    const S = doc.map.states.length;
    const out = new Array(S).fill(0);
    for (let l = 0; l < L; l++) for (let s = 0; s < S; s++) out[s] += counts[l * S + s];
    return out;
  }

  function describe(numbers) {
    return doc.map.states.map((s, i) => (numbers[i] ? `${numbers[i]} ${s.key.replace(/_/g, " ")}` : ""))
      .filter(Boolean).join(", ") || "no cells";
  }

  function bar(numbers, label) {
    const total = numbers.reduce((a, b) => a + b, 0);
    if (!total) return el("span", { class: "nocell", title: `${label}: no cell` });
    return el("span", { class: "bar", title: `${label}: ${describe(numbers)}` },
      numbers.map((n, i) => (n ? el("span", { style: { width: `${(100 * n) / total}%`,
        background: doc.map.states[i].colour } }) : null)));
  }

  function cell(stateIndex, title) {
    const state = doc.map.states[stateIndex];
    return el("span", { class: "cell", title, data: { state: state.key }, style: { background: state.colour } });
  }

  // Sections -----------------------------------------------------------------------------------------------
  function header() {
    const a = doc.audit;
    const snap = doc.snapshot;
    const head = snap.git_head ? `git ${snap.git_head.slice(0, 12)}` : "no git HEAD";
    return el("header", null,
      el("h1", null, "Audit: ", line(doc.repo.name)),
      el("p", null,
        el("span", { class: `badge ${doc.completeness}`, id: "completeness" }, doc.completeness),
        doc.provisional ? el("span", { class: "badge provisional" }, "provisional") : null,
        LIVE ? el("span", { class: "badge live" }, "live") : null,
        LIVE ? el("span", { id: "refresh", class: "muted" }, `refreshes every ${REFRESH_MS / 1000} s`) : null),
      el("p", { class: "muted" },
        `audit ${a.audit_id} started ${a.created_at}; this page ${a.generated_at}; `,
        `${head}${snap.git_dirty ? " (working tree dirty)" : ""}, manifest ${snap.manifest_digest.slice(0, 12)}; `,
        el("span", { class: "mono" }, line(doc.repo.root))),
      doc.notes.map((n) => el("p", { class: "note" }, block(n))),
      doc.blocker && !doc.provisional ? el("p", { class: "warn" }, "Blocked: ", block(doc.blocker)) : null,
      snap.changed_since_snapshot.length ? el("p", { class: "warn" },
        `${plural(snap.changed_since_snapshot.length, "file")} changed after the audit read them; findings there `,
        "may point at moved lines: ", snap.changed_since_snapshot.slice(0, 20).map((p) => [code(p), " "])) : null,
      el("nav", { class: "toc" }, [["#summary", "Summary"], ["#map", "Coverage map"], ["#findings", "Findings"],
        ["#refuted", "Refuted"], ["#blocks", "Work blocks"], ["#threat", "Threat model"], ["#runs", "Runs"]]
        .map(([href, text]) => el("a", { href }, text))));
  }

  function card(title, ...body) {
    return el("div", { class: "card" }, el("h3", null, title), body);
  }

  function kv(pairs) {
    return el("dl", { class: "kv" }, pairs.filter((p) => p[1] !== null && p[1] !== undefined)
      .map(([k, v]) => [el("dt", null, k), el("dd", null, v)]));
  }

  function summary() {
    const totals = doc.coverage.totals;
    const byState = totalsByState(tree.counts);
    const open = doc.map.states.filter((s) => s.group === "open").reduce((n, s) => n + (totals[s.key] || 0), 0);
    const gapCells = (totals.failed || 0) + (totals.skipped || 0);
    const reason = doc.completeness_reason
      || (doc.completeness === "complete" ? "Every cell in scope was reviewed or is not applicable."
        : doc.completeness === "partial" ? `The audit ended with ${plural(gapCells, "gap")} (failed or skipped cells)`
          + (doc.gaps.skipped_files_total ? ` and ${plural(doc.gaps.skipped_files_total, "file")} skipped at intake.` : ".")
          : `${plural(open, "cell")} still open: the audit is not finished.`);
    const counts = doc.summary.findings_by_severity;
    const findings = Object.values(counts).reduce((a, b) => a + b, 0);
    const v = doc.verification;
    const f = doc.forecast;
    const u = doc.usage;
    const runs = doc.runs;
    const r429 = runs.reduce((n, r) => n + r.rate_limited.length, 0);
    return el("section", { id: "summary" },
      el("h2", null, "Summary"),
      el("div", { class: "cards" },
        card("Completeness", el("div", { class: "big" }, doc.completeness), el("p", null, block(reason))),
        card("Coverage",
          el("div", { class: "big" }, `${(totals.reviewed || 0).toLocaleString("en")} of ${(totals.total || 0).toLocaleString("en")}`),
          el("p", { class: "muted" }, "cells reviewed (file or chunk × lens, with the threat model and verification cells)"),
          el("p", null, doc.map.states.map((s, i) => (byState[i] ? el("span", { class: "chip" },
            el("span", { class: "swatch", style: { background: s.colour } }), `${byState[i].toLocaleString("en")} ${words(s.key)}`) : null)))),
        card("Findings",
          el("div", { class: "big" }, findings.toLocaleString("en")),
          el("p", null, SEVERITIES.map((s) => (counts[s] ? el("span", { class: "chip" }, sev(s), ` ${counts[s]}`) : null))),
          el("p", { class: "muted" }, `${plural(doc.refuted.length, "refuted finding")} kept apart; second opinions: `,
            Object.entries(v.counts).map(([k, n]) => `${n} ${words(k)}`).join(", ") || "none",
            v.enabled ? `; verified from ${v.threshold} up.` : "; verification is off.")),
        card("Gaps",
          el("div", { class: "big" }, (gapCells + doc.gaps.skipped_files_total).toLocaleString("en")),
          kv([["failed cells", String(totals.failed || 0)], ["skipped cells", String(totals.skipped || 0)],
            ["files skipped at intake", String(doc.gaps.skipped_files_total)], ["cells still open", String(open)]]),
          doc.gaps.cells.length ? el("details", null,
            el("summary", null, `The first ${doc.gaps.cells.length} of ${doc.gaps.cells_total} gap cells`),
            el("ul", null, doc.gaps.cells.map((g) => el("li", null, `${g.state}: `, at(g.file, g.start_line, g.end_line),
              ` ${line(g.lens)}`, g.reason ? ` — ${line(g.reason)}` : "")))) : null),
        card("What remains",
          f ? kv([["cells waiting", String(f.pending_cells ?? 0)],
            ["next run", `${f.next_run_packets ?? 0} packet(s) in waves ${waveText(f.next_run_waves || [])}`],
            ["input tokens", `~${(f.estimated_input_tokens || 0).toLocaleString("en")}`],
            ["output tokens", `~${(f.estimated_output_tokens || 0).toLocaleString("en")}`],
            ["time", line(f.time_range || "")],
            ["later runs", f.cells_for_later_runs ? `${f.cells_for_later_runs} cell(s)` : null],
            ["cooldown until", f.cooldown_until ? line(f.cooldown_until) : null]])
            : el("p", null, doc.provisional ? "No forecast: nothing is waiting to be packed." : "Nothing: every cell has an outcome.")),
        card("Usage reported",
          u && u.submissions ? kv([["input tokens", (u.input_tokens || 0).toLocaleString("en")],
            ["output tokens", (u.output_tokens || 0).toLocaleString("en")],
            ["API calls", (u.api_calls || 0).toLocaleString("en")],
            ["seconds", (u.seconds || 0).toLocaleString("en")],
            ["calls refused (429)", (u.rate_limited_calls || 0).toLocaleString("en")],
            ["from", `${plural(u.submissions, "submission")} that reported usage`]])
            : el("p", null, "No submission reported its usage.")),
        card("Runs",
          el("div", { class: "big" }, String(runs.length)),
          kv([["packets", String(runs.reduce((n, r) => n + r.packets, 0))],
            ["rate-limit refusals (429)", String(r429)],
            ["analyzer leads", String(doc.leads.total)]]))));
  }

  function mapSection() {
    const m = doc.map;
    const L = m.lenses.length;
    const grid = el("div", { class: "grid", id: "map-grid", role: "tree" });
    const byLens = el("table", { class: "plain" },
      el("thead", null, el("tr", null, el("th", null, "lens"), m.states.map((s) => el("th", { class: "num" }, words(s.key))),
        el("th", { class: "num" }, "total"))),
      el("tbody", null, m.lenses.map((lens, l) => {
        const numbers = stateCounts(tree.counts, l);
        return el("tr", null, el("td", null, line(lens)), numbers.map((n) => el("td", { class: "num" }, String(n))),
          el("td", { class: "num" }, String(numbers.reduce((a, b) => a + b, 0))));
      })));
    const draw = () => drawGrid(grid);
    return el("section", { id: "map" },
      el("h2", null, "Coverage map"),
      el("p", null, `Every file in scope (or each chunk of a long one) × every lens: ${plural(m.cells, "cell")}, `,
        "coloured by state; directories show how their cells stand, lens by lens. Open a directory or a chunked ",
        "file to zoom in; hover over a cell for its place and state."),
      el("div", { class: "legend", id: "legend" }, m.states.map((s) => el("span", { data: { state: s.key } },
        el("span", { class: "swatch", style: { background: s.colour } }), `${line(s.label)} (${s.count.toLocaleString("en")})`))),
      el("details", null, el("summary", null, "Cells by lens and state"), el("div", { class: "scroll" }, byLens)),
      el("div", { class: "controls" },
        el("button", { type: "button", id: "map-open-all", on: { click: () => { ui.expanded = allOpen(tree); draw(); } } }, "Open all"),
        el("button", { type: "button", id: "map-close-all", on: { click: () => { ui.expanded = new Set(); draw(); } } }, "Close all"),
        el("label", null, el("input", { type: "checkbox", checked: ui.gapsOnly, id: "gaps-only",
          on: { change: (e) => { ui.gapsOnly = e.target.checked; draw(); } } }), "only what is not reviewed yet or failed"),
        el("label", null, "file ", el("input", { type: "search", id: "map-path", value: ui.mapPath, placeholder: "path contains",
          on: { input: (e) => { ui.mapPath = e.target.value; draw(); } } }))),
      grid,
      L === 0 ? el("p", { class: "muted" }, "No lens: the audit has no review cell yet.") : null);
  }

  function allOpen(root) {
    const open = new Set();
    const walk = (d) => {
      open.add("d:" + d.path);
      d.kids.forEach(walk);
      d.files.forEach((f) => f.units.length > 1 && open.add("f:" + f.path));
    };
    walk(root);
    return open;
  }

  function columns(row) {
    row.style.gridTemplateColumns = `minmax(260px, 1fr) repeat(${doc.map.lenses.length}, 46px)`;
    return row;
  }

  /** The map's rows as they stand (directories open or closed, the filters), as descriptions to draw from. */
  function mapRows() {
    const rows = [];
    const needle = ui.mapPath.trim().toLowerCase();
    if (needle) {
      const walk = (d) => {
        for (const f of d.files) if (rows.length < ROWS_AT_ONCE && f.path.toLowerCase().includes(needle)) fileRows(rows, f, 0, true);
        d.kids.forEach(walk);
      };
      walk(tree);
      if (!rows.length) rows.push({ kind: "none" });
    } else {
      dirRows(rows, tree, 0);
    }
    return rows;
  }

  /** Draw the map: whole when it has few rows; else only the rows in view (and a margin), each time it scrolls,
   *  so a map of a hundred thousand cells opens and scrolls as fast as a small one. */
  function drawGrid(grid) {
    const rows = mapRows();
    const head = () => columns(el("div", { class: "row head" }, el("span", { class: "name" }, "path"),
      doc.map.lenses.map((l) => el("span", { class: "lens", title: line(l) }, line(l).slice(0, 6)))));
    if (rows.length <= WHOLE_MAP_ROWS) {
      grid.onscroll = null;
      grid.replaceChildren(head(), ...rows.map(drawRow));
      return;
    }
    const spacer = (n) => el("div", { class: "spacer", style: { height: `${n * ROW_PX}px` } });
    const draw = () => {
      const first = Math.max(0, Math.floor(grid.scrollTop / ROW_PX) - 40);
      const last = Math.min(rows.length, first + Math.ceil(grid.clientHeight / ROW_PX) + 80);
      grid.replaceChildren(head(), spacer(first), ...rows.slice(first, last).map(drawRow), spacer(rows.length - last));
    };
    let queued = false;
    grid.onscroll = () => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; draw(); });
    };
    draw();
  }

  function toggle(key, open, label) {
    return el("button", { type: "button", class: "toggle", "aria-expanded": String(open), "aria-label": label,
      on: { click: () => { if (ui.expanded.has(key)) ui.expanded.delete(key); else ui.expanded.add(key);
        drawGrid(document.getElementById("map-grid")); } } }, open ? "▾" : "▸");
  }

  function indent(depth) {
    return { paddingLeft: `${8 + depth * 16}px` };
  }

  function dirRows(rows, d, depth) {
    rows.push({ kind: "dir", d, depth });
    if (!ui.expanded.has("d:" + d.path)) return;
    for (const k of d.kids) if (!ui.gapsOnly || k.gaps) dirRows(rows, k, depth + 1);
    for (const f of d.files) if (!ui.gapsOnly || f.gaps) fileRows(rows, f, depth + 1, false);
  }

  function fileRows(rows, f, depth, full) {
    if (f.reason !== undefined) rows.push({ kind: "skipped", f, depth, full });
    else if (f.units.length === 1) rows.push({ kind: "unit", f, unit: f.units[0], depth, full });
    else {
      rows.push({ kind: "chunked", f, depth, full });
      if (ui.expanded.has("f:" + f.path)) for (const u of f.units) rows.push({ kind: "unit", f, unit: u, depth: depth + 1, chunk: true });
    }
  }

  function drawRow(r) {
    if (r.kind === "dir") return dirRow(r.d, r.depth);
    if (r.kind === "none") return el("p", { class: "muted name" }, "No file path contains that.");
    const f = r.f;
    const name = r.chunk ? `lines ${r.unit[0]}-${r.unit[1]}` : r.full ? line(f.path) : line(f.name);
    if (r.kind === "unit") return unitRow(f, r.unit, name, r.depth);
    if (r.kind === "skipped") {
      return columns(el("div", { class: "row file", data: { path: f.path } },
        el("span", { class: "name", style: indent(r.depth), title: line(f.path) }, name,
          el("span", { class: "skipped-file" }, ` skipped at intake: ${line(f.reason)}`))));
    }
    const key = "f:" + f.path;
    return columns(el("div", { class: "row file chunked", data: { path: f.path } },
      el("span", { class: "name", style: indent(r.depth), title: line(f.path) },
        toggle(key, ui.expanded.has(key), `open the chunks of ${line(f.path)}`), name,
        el("span", { class: "count" }, `${f.units.length} chunks`)),
      doc.map.lenses.map((lens, l) => el("span", { class: "lens" }, bar(stateCounts(f.counts, l), `${line(f.path)} · ${line(lens)}`)))));
  }

  function dirRow(d, depth) {
    const key = "d:" + d.path;
    const open = ui.expanded.has(key);
    const total = totalsByState(d.counts);
    const done = doc.map.states.reduce((n, s, i) => n + (s.group === "done" ? total[i] : 0), 0);
    const label = d.path === "" ? `${line(doc.repo.name)}/` : `${line(d.name)}/`;
    return columns(el("div", { class: "row dir", role: "treeitem", "aria-expanded": String(open), data: { path: d.path } },
      el("span", { class: "name", style: indent(depth), title: line(d.path || doc.repo.name) },
        toggle(key, open, `open ${line(d.path || "the repository")}`), label,
        el("span", { class: "count" }, `${done.toLocaleString("en")} of ${total.reduce((a, b) => a + b, 0).toLocaleString("en")} done`
          + (d.gaps ? `, ${d.gaps.toLocaleString("en")} open, failed or skipped` : ""))),
      doc.map.lenses.map((lens, l) => el("span", { class: "lens" }, bar(stateCounts(d.counts, l), `${line(d.path || "repository")} · ${line(lens)}`)))));
  }

  function unitRow(f, unit, name, depth) {
    const [start, end, codes] = unit;
    const lenses = doc.map.lenses;
    return columns(el("div", { class: "row unit", data: { path: f.path } },
      el("span", { class: "name", style: indent(depth), title: `${line(f.path)}:${start}-${end}` }, name),
      lenses.map((lens, l) => el("span", { class: "lens" }, codes[l] === "." || codes[l] === undefined
        ? el("span", { class: "nocell", title: `${line(lens)} does not read this file` })
        : cell(parseInt(codes[l], 36), `${line(f.path)}:${start}-${end} · ${line(lens)}: ${words(doc.map.states[parseInt(codes[l], 36)].key)}`)))));
  }

  // Findings -----------------------------------------------------------------------------------------------
  const SORTS = {
    id: (f) => [parseInt(f.id.slice(1), 10) || 0],
    severity: (f) => [rank(SEVERITIES, f.severity), rank(STATUSES, f.status), f.file, f.start_line],
    title: (f) => [f.title.toLowerCase()],
    where: (f) => [f.file, f.start_line],
    lens: (f) => [f.lenses.join(",")],
    category: (f) => [f.category_id],
    status: (f) => [rank(STATUSES, f.status), rank(SEVERITIES, f.severity)],
    confidence: (f) => [rank(CONFIDENCES, f.confidence), rank(SEVERITIES, f.severity)],
  };
  const COLUMNS = [["id", "ID"], ["severity", "Severity"], ["title", "Title"], ["where", "Location"], ["lens", "Lens"],
    ["category", "Category"], ["status", "Verdict"], ["confidence", "Confidence"]];

  function compare(a, b) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (a[i] < b[i]) return -1;
      if (a[i] > b[i]) return 1;
    }
    return 0;
  }

  function shownFindings() {
    const needle = ui.path.trim().toLowerCase();
    const kept = doc.findings.filter((f) => !ui.hiddenSeverities.has(f.severity)
      && (!ui.lens || f.lenses.includes(ui.lens)) && (!ui.category || f.category_id === ui.category)
      && (!ui.status || f.status === ui.status) && (!needle || f.file.toLowerCase().includes(needle)));
    const key = SORTS[ui.sort.key];
    return kept.map((f) => [key(f), f]).sort((a, b) => ui.sort.dir * compare(a[0], b[0]) || compare(SORTS.id(a[1]), SORTS.id(b[1])))
      .map((p) => p[1]);
  }

  function choices(values, label, id, current, onChange) {
    return el("label", null, label, " ", el("select", { id, on: { change: (e) => onChange(e.target.value) } },
      el("option", { value: "" }, "all"),
      values.map((v) => el("option", { value: v, selected: v === current }, words(v)))));
  }

  function findingsSection() {
    const all = doc.findings;
    const count = el("span", { id: "findings-count", class: "muted" });
    const table = el("table", { class: "findings", id: "findings-table" });
    const more = el("p");
    const draw = () => drawFindings(table, count, more);
    const uniq = (f) => [...new Set(all.flatMap(f))].sort();
    const severities = SEVERITIES.filter((s) => all.some((f) => f.severity === s));
    return el("section", { id: "findings" },
      el("h2", null, `Findings (${all.length})`),
      all.length ? el("div", { class: "controls", id: "finding-filters" },
        el("span", null, "severity:"),
        severities.map((s) => el("label", null, el("input", { type: "checkbox", checked: !ui.hiddenSeverities.has(s),
          data: { severity: s }, on: { change: (e) => { if (e.target.checked) ui.hiddenSeverities.delete(s);
            else ui.hiddenSeverities.add(s); draw(); } } }), sev(s), ` ${all.filter((f) => f.severity === s).length}`)),
        choices(uniq((f) => f.lenses), "lens", "filter-lens", ui.lens, (v) => { ui.lens = v; draw(); }),
        choices(uniq((f) => [f.category_id]), "category", "filter-category", ui.category, (v) => { ui.category = v; draw(); }),
        choices(STATUSES.filter((s) => all.some((f) => f.status === s)), "verdict", "filter-status", ui.status,
          (v) => { ui.status = v; draw(); }),
        el("label", null, "path ", el("input", { type: "search", id: "filter-path", value: ui.path, placeholder: "contains",
          on: { input: (e) => { ui.path = e.target.value; draw(); } } })),
        count) : el("p", null, doc.provisional ? "No findings so far." : "No findings were reported."),
      all.length ? el("div", { class: "scroll" }, table) : null, more,
      (() => { draw(); return null; })());
  }

  function drawFindings(table, count, more) {
    const list = shownFindings();
    const head = el("thead", null, el("tr", null, COLUMNS.map(([key, label]) => el("th", { scope: "col" },
      el("button", { type: "button", "aria-sort": ui.sort.key === key ? (ui.sort.dir > 0 ? "ascending" : "descending") : "none",
        data: { sort: key }, on: { click: () => { ui.sort = { key, dir: ui.sort.key === key ? -ui.sort.dir : 1 };
          drawFindings(table, count, more); } } }, label)))));
    const body = el("tbody");
    for (const f of list.slice(0, ui.rows)) findingRows(body, f, COLUMNS.length);
    table.replaceChildren(head, body);
    count.textContent = `${list.length} of ${doc.findings.length} shown`;
    more.replaceChildren(list.length > ui.rows ? el("button", { type: "button",
      on: { click: () => { ui.rows += ROWS_AT_ONCE; drawFindings(table, count, more); } } },
    `show ${Math.min(ROWS_AT_ONCE, list.length - ui.rows)} more of ${list.length - ui.rows}`) : "");
  }

  function findingRows(body, f, span) {
    const open = ui.open.has(f.fingerprint);
    const flip = () => { if (ui.open.has(f.fingerprint)) ui.open.delete(f.fingerprint); else ui.open.add(f.fingerprint);
      const next = el("tbody"); findingRows(next, f, span); row.replaceWith(...next.childNodes); detail && detail.remove(); };
    const row = el("tr", { class: `finding${open ? " open" : ""}`, tabindex: "0", "aria-expanded": String(open),
      data: { id: f.id, severity: f.severity }, on: { click: flip, keydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); flip(); } } } },
    el("td", { class: "mono" }, line(f.id)),
    el("td", null, sev(f.severity), f.original_severity ? el("div", { class: "muted" }, `reported ${line(f.original_severity)}`) : null),
    el("td", { class: "title" }, line(f.title)),
    el("td", { class: "where" }, at(f.file, f.start_line, f.end_line)),
    el("td", null, f.lenses.map((l) => el("span", { class: "chip" }, line(l)))),
    el("td", null, line(f.category_id), f.category !== f.category_id ? el("div", { class: "muted" }, line(f.category)) : null),
    el("td", null, statusChip(f.status)),
    el("td", null, line(f.confidence)));
    body.append(row);
    const detail = open ? el("tr", { class: "detail" }, el("td", { colspan: String(span) }, findingDetail(f))) : null;
    if (detail) body.append(detail);
  }

  function findingDetail(f) {
    const part = (title, ...body) => [el("h4", null, title), body];
    return el("div", { class: "detail" },
      part("Description", el("div", { class: "text" }, block(f.description))),
      part("Evidence", at(f.file, f.start_line, f.end_line), f.symbol ? [" in ", code(f.symbol)] : null, pre(f.evidence)),
      part("Recommendation", el("div", { class: "text" }, block(f.recommendation))),
      f.related_locations.length ? part("Related locations", el("ul", null, f.related_locations.map((r) =>
        el("li", null, `${line(r.role)}: `, at(r.file, r.start_line, r.end_line))))) : null,
      f.evidence_ranges.length > 1 ? part("Also reported at", f.evidence_ranges.slice(1).map((r) => `${r.start_line}-${r.end_line}`).join(", ")) : null,
      f.severity_reasons.length > 1 ? part("Severity", el("ul", null, f.severity_reasons.map((r) => el("li", null, line(r))))) : null,
      f.verifications.length ? part("Verification", f.verifications.map((v) => el("div", null,
        el("p", null, statusChip(v.verdict), v.fair_severity ? ` fair severity ${line(v.fair_severity)}` : "", ` (${line(v.task_id)}) `,
          block(v.rationale || "")),
        (v.cited || []).map((c) => [el("div", null, `${line(c.role || "cited")}: `, at(c.file, c.start_line, c.end_line)), pre(c.quote)])))) : null,
      f.merged_duplicates.length ? part("Merged duplicates", f.merged_duplicates.map((m) => el("p", null, `${line(m.task_id)}: `, block(m.rationale || "")))) : null,
      f.runtime_evidence.length ? part("Runtime evidence", f.runtime_evidence.map((e) => el("div", null,
        el("p", null, statusChip(e.verdict), ` ${line(e.kind || "log")}`, e.added_by ? ` by ${line(e.added_by)}` : "", ` on ${line(e.added_at)}`),
        e.command ? pre(e.command) : null, pre(e.output || "")))) : null,
      f.baseline_state ? part("Since the previous audit", words(f.baseline_state)) : null,
      part("Fingerprint", code(f.fingerprint), f.reported_by.length ? ` reported by ${f.reported_by.map(line).join(", ")}` : ""));
  }

  function refutedSection() {
    const list = doc.refuted;
    const body = el("tbody");
    for (const f of list) findingRows(body, f, COLUMNS.length);
    return el("section", { id: "refuted" },
      el("h2", null, `Refuted findings (${list.length})`),
      list.length ? [el("p", null, "Reported by a reviewer, then refuted by a verifier who found what defeats them; kept with "
        + "the counter-evidence. Open one to read why."),
      el("div", { class: "scroll" }, el("table", { class: "findings", id: "refuted-table" },
        el("thead", null, el("tr", null, COLUMNS.map(([, label]) => el("th", { scope: "col" }, label)))), body))]
        : el("p", { class: "muted" }, "None."));
  }

  function blocksSection() {
    return el("section", { id: "blocks" },
      el("h2", null, `Work blocks (${doc.work_blocks.length})`),
      doc.work_blocks.length ? el("ol", null, doc.work_blocks.map((b) => el("li", null, sev(b.severity), " ", line(b.title),
        el("span", { class: "muted" }, ` — ${line(b.effort)}; one change: ${line(b.basis)}; findings ${b.findings.map(line).join(", ")}; `),
        b.files.map((p) => [code(p), " "]))))
        : el("p", { class: "muted" }, "None."));
  }

  function threatSection() {
    const m = doc.threat_model;
    const c = doc.context;
    if (!m) {
      return el("section", { id: "threat" }, el("h2", null, "Threat model"),
        el("p", null, `None was written: ${line(c.reason || "the context packet was not answered")}.`));
    }
    const list = (title, items, render) => (items && items.length ? [el("h3", null, title), el("ul", null, items.map((i) => el("li", null, render(i))))] : null);
    const paths = (ps) => (ps || []).map((p) => [code(p), " "]);
    return el("section", { id: "threat" },
      el("h2", null, "Threat model"),
      el("p", { class: "muted" }, `Written by a reviewer before review began (${line(c.origin || "context packet")}); `
        + "every review and verification packet carried it. It is the reviewers' reading, not the engine's."),
      el("p", { class: "text" }, block(m.summary)),
      m.entry_points && m.entry_points.length ? el("table", { class: "plain" },
        el("thead", null, el("tr", null, el("th", null, "entry point"), el("th", null, "exposure"), el("th", null, "reached by"))),
        el("tbody", null, m.entry_points.map((e) => el("tr", null, el("td", null, code(e.path), " ", line(e.name)),
          el("td", null, line(e.exposure)), el("td", null, line(e.reached_by)))))) : null,
      list("Trust boundaries", m.trust_boundaries, (b) => [line(b.description), " ", paths(b.paths)]),
      list("Assets", m.assets, (a) => `${line(a.name)}: ${line(a.description)}`),
      list("Dangerous sinks", m.dangerous_sinks, (x) => [code(x.path), `: ${line(x.description)}`]),
      list("Existing controls", m.controls, (x) => [code(x.path), `: ${line(x.description)}`]),
      list("Development-only", m.development_only, (x) => [code(x.path), `: ${line(x.why)}`]),
      list("Test-only", m.test_only, (x) => [code(x.path), `: ${line(x.why)}`]),
      list("Deprecated", m.deprecated, (x) => [code(x.path), `: ${line(x.why)}`]));
  }

  /** A run's waves as "4+4+2"; a long list with its equal waves folded ("31 waves of 16, 1 of 4"). */
  function waveText(waves) {
    if (waves.length <= 8) return waves.join("+") || "-";
    const out = [];
    for (let i = 0; i < waves.length;) {
      let n = 1;
      while (i + n < waves.length && waves[i + n] === waves[i]) n += 1;
      out.push(`${n} ${n === 1 ? "wave" : "waves"} of ${waves[i]}`);
      i += n;
    }
    return out.join(", ");
  }

  function runsSection() {
    const runs = doc.runs;
    if (!runs.length) {
      return el("section", { id: "runs" }, el("h2", null, "Runs"), el("p", { class: "muted" }, "No run yet."));
    }
    const time = (s) => (s ? Date.parse(s) : NaN);
    const ends = runs.flatMap((r) => [r.created_at, r.merged_at, ...r.submissions, ...r.rate_limited, ...r.cooldowns.map((c) => c[1])]
      .map(time)).filter((t) => !Number.isNaN(t));
    const now = time(doc.audit.generated_at);
    const t0 = Math.min(...runs.map((r) => time(r.created_at)));
    const t1 = Math.max(...ends, runs.some((r) => !r.merged_at) && !Number.isNaN(now) ? now : t0 + 1000, t0 + 1000);
    const pos = (t) => `${(100 * (t - t0)) / (t1 - t0)}%`;
    const width = (a, b) => `${(100 * Math.max(0, b - a)) / (t1 - t0)}%`;
    const rows = runs.map((r) => {
      const start = time(r.created_at);
      const end = r.merged_at ? time(r.merged_at) : Math.max(start, ...r.submissions.map(time), Number.isNaN(now) ? start : now);
      const failed = Object.values(r.failures).reduce((a, b) => a + b, 0);
      return el("div", { class: "trow", data: { run: r.run_id } },
        el("div", null, el("div", { class: "mono" }, line(r.run_id)),
          el("div", { class: "muted" }, `${words(r.packet_kind)} · width ${r.wave_size} · waves ${waveText(r.waves)}`)),
        el("div", { class: "track", title: `${line(r.run_id)}: ${r.packets} packet(s), ${r.submitted} submitted, ${failed} failed` },
          el("span", { class: `span${r.merged_at ? "" : " open"}`, style: { left: pos(start), width: width(start, end) } }),
          r.cooldowns.map(([a, b]) => el("span", { class: "cool", title: `cooldown ${line(a)} → ${line(b)}`,
            style: { left: pos(time(a)), width: width(time(a), time(b)) } })),
          r.submissions.map((s) => el("span", { class: "tick", title: `submitted ${line(s)}`, style: { left: pos(time(s)) } })),
          r.rate_limited.map((s) => el("span", { class: "r429", title: `429 at ${line(s)}`, style: { left: pos(time(s)) } }))));
    });
    const num = (v) => el("td", { class: "num" }, String(v ?? 0));
    return el("section", { id: "runs" },
      el("h2", null, `Runs (${runs.length})`),
      el("p", { class: "muted" }, "Each run from dispatch to merge: blue ticks are packets handed in, red marks are ",
        "rate-limit refusals (429), hatched spans are cooldowns."),
      el("div", { class: "timeline", id: "timeline" }, rows,
        el("div", { class: "axis" }, el("span", null, new Date(t0).toISOString()), el("span", null, new Date(t1).toISOString()))),
      el("div", { class: "scroll" }, el("table", { class: "plain", id: "runs-table" },
        el("thead", null, el("tr", null, ["run", "packets of", "state", "started", "merged"].map((h) => el("th", null, h)),
          ["packets", "submitted", "failed", "width", "429s", "input tokens", "output tokens"].map((h) => el("th", { class: "num" }, h)),
          el("th", null, "waves"), el("th", null, "cooldown until"))),
        el("tbody", null, runs.map((r) => el("tr", null,
          el("td", { class: "mono" }, line(r.run_id)), el("td", null, words(r.packet_kind)), el("td", null, words(r.state)),
          el("td", null, line(r.created_at)), el("td", null, line(r.merged_at || "-")),
          num(r.packets), num(r.submitted), num(Object.values(r.failures).reduce((a, b) => a + b, 0)), num(r.wave_size),
          num(r.rate_limited.length), num(r.usage.input_tokens), num(r.usage.output_tokens),
          el("td", null, waveText(r.waves)),
          el("td", null, r.cooldowns.length ? line(r.cooldowns[r.cooldowns.length - 1][1]) : "-")))))));
  }

  function footer() {
    return el("footer", null, `Written by audit-mcp (${doc.schema_version}). This page makes no network request`,
      LIVE ? " but to its own address, to refresh" : "", "; its data is the JSON block inside it, and report.json ",
      "beside it holds the same findings.");
  }

  // Drawing and refreshing ---------------------------------------------------------------------------------
  /** Draw the whole page; drawn again after a refresh, where the reader was is kept: the scroll of the page and
   *  of the map, and the field being typed in. */
  function render() {
    const focused = document.activeElement && document.activeElement.id;
    const caret = focused ? document.activeElement.selectionStart : null;
    const before = document.getElementById("map-grid");
    const scroll = [window.scrollX, window.scrollY, before ? before.scrollTop : 0];
    tree = buildTree(doc.map);
    if (ui.expanded === null) ui.expanded = firstExpansion(tree);
    const map = mapSection();
    document.getElementById("app").replaceChildren(header(), summary(), map, findingsSection(), refutedSection(),
      blocksSection(), threatSection(), runsSection(), footer());
    const grid = document.getElementById("map-grid");
    drawGrid(grid);
    grid.scrollTop = scroll[2]; // a map drawn by the rows in view draws them again as it scrolls there
    window.scrollTo(scroll[0], scroll[1]);
    const again = focused && document.getElementById(focused);
    if (again) {
      again.focus();
      if (caret !== null && typeof again.setSelectionRange === "function" && again.type === "search") {
        again.setSelectionRange(caret, caret);
      }
    }
    document.title = `Audit: ${line(doc.repo.name)}${doc.provisional ? " (provisional)" : ""}`;
    document.documentElement.dataset.ready = String(Number(document.documentElement.dataset.ready || 0) + 1);
  }

  function load(text) {
    dataText = text;
    doc = JSON.parse(text);
  }

  async function refresh() {
    const status = () => document.getElementById("refresh");
    try {
      const response = await fetch(location.pathname + location.search, { cache: "no-cache", credentials: "same-origin" });
      if (!response.ok) {
        if (status()) status().textContent = `refresh refused: HTTP ${response.status}`;
        return;
      }
      const page = await response.text();
      const start = page.indexOf(DATA_OPEN);
      const end = start < 0 ? -1 : page.indexOf(DATA_CLOSE, start);
      if (end < 0) return;
      const text = page.slice(start + DATA_OPEN.length, end);
      if (text !== dataText) {
        load(text);
        render();
      }
      if (status()) status().textContent = `updated ${new Date().toLocaleTimeString("en")}`;
    } catch (err) {
      if (status()) status().textContent = `refresh failed: ${line(err && err.message)}`;
    }
  }

  load(document.getElementById("audit-data").textContent);
  render();
  performance.mark("audit-page-rendered");
  if (LIVE) setInterval(refresh, REFRESH_MS);
})();
