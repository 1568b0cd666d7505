// The chat page of `actors serve`: sessions, streamed runs, tool calls, the agent tree, approvals.
// Plain DOM, no framework, no build step. Data is only ever shown through textContent.
// A run in progress is saved in sessionStorage after each event, so a reload picks the stream
// up again from the last event id (GET .../runs/{run}/events with Last-Event-ID).
"use strict";

const LIVE_KEY = "actors.live";
const TOKEN_KEY = "actors.token";
const SESSION_KEY = "actors.session";

const $ = (id) => document.getElementById(id);
const state = { token: null, agent: "", session: null, messages: [], tree: {}, live: null,
                attached: [] };
// Images up to this size are shown inline (as data: URLs); bigger parts show as a chip.
const INLINE_IMAGE_BYTES = 2_000_000;
const SHOWN_IMAGES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// Content is a string, or an array of parts ({type: "text"|"image"|"audio"|"document", ...}).
function contentNodes(content) {
  if (typeof content === "string") return [document.createTextNode(content)];
  const nodes = [];
  for (const part of content || []) {
    if (part.type === "text") {
      nodes.push(document.createTextNode(part.text));
    } else if (part.type === "image" && part.data && SHOWN_IMAGES.has(part.media_type)
               && part.data.length * 0.75 <= INLINE_IMAGE_BYTES) {
      const img = el("img", "part-image");
      img.alt = part.name || part.media_type;
      img.src = "data:" + part.media_type + ";base64," + part.data;
      nodes.push(img);
    } else {
      nodes.push(el("span", "chip", partLabel(part)));
    }
  }
  return nodes;
}

function partLabel(part) {
  const size = part.data ? Math.round(part.data.length * 0.75 / 1000) + " kB" : part.url || "";
  return [part.type, part.name || part.media_type || "", size].filter(Boolean).join(" · ");
}

function userBlock(content) {
  const node = el("div", "msg user");
  node.append(...contentNodes(content));
  return node;
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function setState(name) {
  document.body.dataset.state = name;
  const busy = name === "streaming";
  $("send").disabled = busy || !state.session;
  $("cancel").disabled = !busy;
  $("status").textContent = busy ? "running…" : "";
}

// -- the API --------------------------------------------------------------------------------

async function api(method, path, body, headers) {
  const all = Object.assign({ Accept: "application/json" }, headers || {});
  if (body !== undefined) all["Content-Type"] = "application/json";
  if (state.token) all.Authorization = "Bearer " + state.token;
  const response = await fetch(path, {
    method,
    headers: all,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    let code = "http_" + response.status;
    let message = response.statusText;
    try {
      const error = (await response.json()).error;
      code = error.code;
      message = error.message;
    } catch (_) {
      // not JSON: keep the status line
    }
    if (response.status === 401) $("token-form").hidden = false;
    throw new ApiError(response.status, code, message);
  }
  return response;
}

async function getJson(path) {
  return (await api("GET", path)).json();
}

// Server-sent events from a fetch response (EventSource cannot send a token or a POST body).
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const chunk = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { id: null, event: "message", data: "" };
      for (const line of chunk.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = line.slice(0, colon);
        const text = line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") event.id = Number(text);
        else if (field === "event") event.event = text;
        else if (field === "data") event.data += text;
      }
      if (event.data) onEvent(event.id, event.event, JSON.parse(event.data));
    }
  }
}

// -- sessions -------------------------------------------------------------------------------

async function loadSessions() {
  const listing = await getJson("/sessions?limit=200");
  const list = $("sessions");
  list.replaceChildren();
  for (const session of listing.sessions) {
    const item = el("li", session.session_id === state.session ? "selected" : "", session.session_id);
    item.dataset.session = session.session_id;
    item.title = "created " + session.created_at;
    item.addEventListener("click", () => selectSession(session.session_id));
    list.append(item);
  }
}

async function newSession() {
  showError("");
  const made = await (await api("POST", "/sessions", {})).json();
  await loadSessions();
  await selectSession(made.session_id);
}

async function selectSession(sessionId) {
  if (state.live && state.live.session !== sessionId) return; // a run streams: stay with it
  state.session = sessionId;
  sessionStorage.setItem(SESSION_KEY, sessionId);
  for (const item of $("sessions").children) {
    item.classList.toggle("selected", item.dataset.session === sessionId);
  }
  $("session-title").textContent = "Session " + sessionId;
  const transcript = await getJson(`/sessions/${sessionId}/transcript`);
  state.messages = transcript.messages;
  const requests = (await getJson(`/sessions/${sessionId}/requests`)).requests;
  state.tree = flatten(await getJson(`/sessions/${sessionId}/tree`));
  render(requests);
  renderTree();
  if (!state.live) setState("idle");
}

function flatten(node, into) {
  const out = into || {};
  out[node.agent_id] = { name: node.name, parent: node.parent_id, status: node.status };
  for (const child of node.children) flatten(child, out);
  return out;
}

// -- rendering ------------------------------------------------------------------------------

function render(requests) {
  const box = $("messages");
  box.replaceChildren();
  const upTo = state.live ? state.live.base : state.messages.length;
  const cards = {};
  for (const message of state.messages.slice(0, upTo)) {
    if (message.role === "user") {
      box.append(userBlock(message.content));
    } else if (message.role === "assistant") {
      if (message.content) box.append(textBlock(null, message.content));
      for (const call of message.tool_calls || []) {
        const card = toolCard(call.id, call.name, call.arguments);
        cards[call.id] = card;
        box.append(card);
      }
    } else if (message.role === "tool") {
      const card = cards[message.tool_call_id];
      if (card) setResult(card, message.content, message.is_error);
    }
  }
  for (const request of requests || []) box.append(requestCard(request));
  if (state.live) {
    for (const block of state.live.blocks) box.append(renderBlock(block));
  }
  box.scrollTop = box.scrollHeight;
}

function textBlock(agentId, text) {
  const sub = agentId && agentId !== state.session;
  const node = el("div", sub ? "msg assistant sub" : "msg assistant");
  if (sub) node.append(el("span", "who", (state.tree[agentId] || {}).name || agentId));
  node.append(document.createTextNode(text));
  node.dataset.agent = agentId || state.session;
  return node;
}

function toolCard(id, name, args) {
  const card = el("div", "tool");
  card.dataset.toolCall = id;
  card.append(el("span", "name", "⚙ " + name + "(" + JSON.stringify(args || {}) + ")"));
  return card;
}

function setResult(card, content, isError) {
  card.classList.toggle("error", Boolean(isError));
  let result = card.querySelector(".result");
  if (!result) {
    result = el("span", "result");
    card.append(result);
  }
  result.replaceChildren(document.createTextNode("→ "), ...contentNodes(content));
}

function requestCard(request) {
  const card = el("div", "approval");
  card.dataset.request = request.id;
  card.append(el("div", "", request.prompt || request.kind));
  if (request.kind === "approval") {
    const approve = el("button", "approve", "Approve");
    const deny = el("button", "deny", "Deny");
    approve.type = deny.type = "button";
    approve.addEventListener("click", () => answer(request.id, { ok: true }));
    deny.addEventListener("click", () => answer(request.id, { ok: false, reason: "denied in the chat" }));
    card.append(approve, deny);
  } else {
    const input = el("input", "answer-text");
    const send = el("button", "answer", "Answer");
    send.type = "button";
    send.addEventListener("click", () => answer(request.id, { ok: true, data: input.value }));
    card.append(input, send);
  }
  return card;
}

function renderBlock(block) {
  if (block.type === "user") return userBlock(block.content);
  if (block.type === "text") return textBlock(block.agent, block.text);
  if (block.type === "tool") {
    const card = toolCard(block.id, block.name, block.args);
    if (block.result !== undefined) setResult(card, block.result, block.isError);
    return card;
  }
  if (block.type === "request") {
    // Answerable once the run has ended (suspended): the page then shows it from the store.
    const card = requestCard(block.request);
    for (const button of card.querySelectorAll("button")) button.disabled = true;
    return card;
  }
  const end = el("div", "end " + (block.failed ? "failed" : ""), block.text);
  return end;
}

function renderTree() {
  const root = Object.keys(state.tree).find((id) => !state.tree[id].parent);
  const list = $("tree");
  list.replaceChildren();
  if (root) list.append(treeItem(root));
}

function treeItem(agentId) {
  const node = state.tree[agentId];
  const item = el("li", "", node.name + " ");
  item.dataset.agent = agentId;
  item.dataset.status = node.status;
  item.append(el("span", "st st-" + node.status, node.status));
  const children = Object.keys(state.tree).filter((id) => state.tree[id].parent === agentId);
  if (children.length) {
    const list = el("ul");
    for (const child of children) list.append(treeItem(child));
    item.append(list);
  }
  return item;
}

// -- runs -----------------------------------------------------------------------------------

function saveLive() {
  if (state.live) sessionStorage.setItem(LIVE_KEY, JSON.stringify(state.live));
  else sessionStorage.removeItem(LIVE_KEY);
}

function apply(id, kind, data) {
  const live = state.live;
  live.last = id;
  document.body.dataset.lastEventId = String(id);
  const blocks = live.blocks;
  const lastBlock = blocks[blocks.length - 1];
  if (kind === "run_started") {
    live.run = data.run_id;
    if (state.tree[state.session]) state.tree[state.session].status = "running";
  } else if (kind === "text_delta") {
    if (lastBlock && lastBlock.type === "text" && lastBlock.agent === data.agent_id) {
      lastBlock.text += data.text;
    } else {
      blocks.push({ type: "text", agent: data.agent_id, text: data.text });
    }
  } else if (kind === "tool_call_started") {
    blocks.push({ type: "tool", id: data.tool_call_id, name: data.tool_name, args: data.arguments });
  } else if (kind === "tool_call_finished") {
    const card = blocks.find((b) => b.type === "tool" && b.id === data.tool_call_id);
    if (card) {
      card.result = data.content;
      card.isError = data.is_error;
    } else {
      blocks.push({ type: "tool", id: data.tool_call_id, name: data.tool_name, args: {},
                    result: data.content, isError: data.is_error });
    }
  } else if (kind === "subagent_spawned") {
    state.tree[data.child_id] = { name: data.name, parent: data.agent_id, status: "running" };
  } else if (kind === "subagent_finished") {
    if (state.tree[data.child_id]) state.tree[data.child_id].status = data.status;
  } else if (kind === "suspended") {
    blocks.push({ type: "request", request: data.request });
  } else if (kind === "run_ended") {
    live.ended = true;
    if (data.error) blocks.push({ type: "end", failed: true, text: "failed: " + data.error.message });
    else if (data.result.status === "cancelled") blocks.push({ type: "end", text: "cancelled" });
  }
  live.tree = state.tree;
  saveLive();
  render();
  renderTree();
}

async function follow(response) {
  setState("streaming");
  try {
    await readEvents(response, apply);
  } finally {
    const sessionId = state.live.session;
    const ended = state.live.ended;
    if (ended) {
      state.live = null;
      saveLive();
      await selectSession(sessionId); // the stored transcript, now that the run is in it
    }
    setState("idle");
  }
}

async function startRun(path, body, firstBlock) {
  showError("");
  state.live = { session: state.session, run: null, last: -1, base: state.messages.length,
                 blocks: firstBlock ? [firstBlock] : [], tree: state.tree, ended: false };
  render();
  let response;
  try {
    response = await api("POST", path, body, { Accept: "text/event-stream" });
  } catch (error) {
    state.live = null;
    saveLive();
    setState("idle");
    await selectSession(state.session);
    showError(error.message);
    return;
  }
  await follow(response);
}

async function send(event) {
  event.preventDefault();
  const text = $("prompt").value;
  const files = state.attached;
  if ((!text.trim() && !files.length) || !state.session || state.live) return;
  $("prompt").value = "";
  state.attached = [];
  renderAttached();
  const prompt = files.length ? [...(text.trim() ? [{ type: "text", text }] : []), ...files] : text;
  await startRun(`/sessions/${state.session}/runs`, { prompt }, { type: "user", content: prompt });
}

// -- attachments ----------------------------------------------------------------------------

function kindOf(mediaType) {
  if (mediaType.startsWith("image/")) return "image";
  if (mediaType.startsWith("audio/")) return "audio";
  return "document";
}

function readPart(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      const mediaType = file.type || "application/octet-stream";
      resolve({ type: kindOf(mediaType), media_type: mediaType, name: file.name,
                data: url.slice(url.indexOf(",") + 1) });
    };
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

async function attach() {
  const input = $("attach");
  for (const file of input.files) state.attached.push(await readPart(file));
  input.value = "";
  renderAttached();
}

function renderAttached() {
  const box = $("attached");
  box.replaceChildren();
  state.attached.forEach((part, index) => {
    const chip = el("span", "chip", partLabel(part));
    const remove = el("button", "", "×");
    remove.type = "button";
    remove.title = "Remove";
    remove.addEventListener("click", () => {
      state.attached.splice(index, 1);
      renderAttached();
    });
    chip.append(remove);
    box.append(chip);
  });
}

async function answer(requestId, reply) {
  if (state.live) return;
  await startRun(`/sessions/${state.session}/answers`, { answers: { [requestId]: reply } }, null);
}

async function cancel() {
  if (state.session) await api("POST", `/sessions/${state.session}/cancel`, {});
}

// A reload in the middle of a run: show what was seen, and read the rest from the last event id.
async function resumeLive() {
  const saved = JSON.parse(sessionStorage.getItem(LIVE_KEY) || "null");
  if (!saved || !saved.run) return false;
  state.session = saved.session;
  await selectSession(saved.session);
  state.live = saved;
  state.tree = saved.tree || state.tree;
  render();
  renderTree();
  let response;
  try {
    response = await api("GET", `/sessions/${saved.session}/runs/${saved.run}/events`, undefined, {
      Accept: "text/event-stream",
      "Last-Event-ID": String(saved.last),
    });
  } catch (error) {
    state.live = null; // the stream is gone (ended long ago, or another server): show the store
    saveLive();
    await selectSession(saved.session);
    return true;
  }
  await follow(response);
  return true;
}

async function start() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  state.token = sessionStorage.getItem(TOKEN_KEY);
  $("composer").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) send(event);
  });
  $("cancel").addEventListener("click", () => cancel().catch((e) => showError(e.message)));
  $("attach").addEventListener("change", () => attach().catch((e) => showError(e.message)));
  $("new-session").addEventListener("click", () => newSession().catch((e) => showError(e.message)));
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("token").value;
    sessionStorage.setItem(TOKEN_KEY, state.token);
    $("token-form").hidden = true;
    start2();
  });
  await start2();
}

async function start2() {
  try {
    state.agent = (await getJson("/agent")).name;
    $("agent-name").textContent = state.agent;
    await loadSessions();
    setState("idle");
    const streaming = resumeLive();
    if (!(await streaming)) {
      const last = sessionStorage.getItem(SESSION_KEY);
      if (last && document.querySelector(`#sessions li[data-session="${CSS.escape(last)}"]`)) {
        await selectSession(last);
      }
    }
  } catch (error) {
    setState("idle");
    showError(error.message);
  }
}

start();
