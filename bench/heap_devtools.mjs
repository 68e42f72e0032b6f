// bench/heap_devtools.mjs PORT SNAPSHOT OUT: load a .heapsnapshot (luaspy
// heap -f heapsnapshot) into the Memory panel of Chromium's own DevTools
// frontend and take screenshots, to look at what DevTools makes of it
// (docs/heap.md §5). A check by hand, not a test: nothing is asserted.
//
//   chromium --headless=new --no-sandbox --remote-debugging-address=127.0.0.1 \
//            --remote-debugging-port=9333 --user-data-dir=$(mktemp -d) about:blank &
//   node --experimental-websocket bench/heap_devtools.mjs 9333 app.heapsnapshot /tmp/shot
//
// Writes OUT-summary.png (Summary view, largest retained first) and
// OUT-retainers.png (the second largest table selected, its Retainers
// pane), and prints the view's first rows. The frontend is the one
// Chromium serves at /devtools/inspector.html, attached to the blank
// page; the file goes in through Runtime.evaluate in 1 MiB pieces (the
// frontend's CSP refuses fetches) and ProfilesPanel.loadFromFile.
// Internal DevTools APIs (Chromium 156): they move between releases.
import { readFileSync, writeFileSync } from 'fs';
const [port, snap, out] = process.argv.slice(2);
if (!port || !snap || !out) {
	console.error('usage: heap_devtools.mjs PORT SNAPSHOT OUT');
	process.exit(2);
}
const http = async (p, method = 'GET') => (await fetch(`http://127.0.0.1:${port}${p}`, { method })).json();
const page = (await http('/json/list')).find(p => p.type === 'page');
const fe = `http://127.0.0.1:${port}/devtools/inspector.html?ws=127.0.0.1:${port}/devtools/page/${page.id}`;
const target = await http('/json/new?' + encodeURIComponent(fe), 'PUT');
const ws = new WebSocket(target.webSocketDebuggerUrl);
await new Promise(r => { ws.onopen = r; });
let seq = 0;
const pending = new Map();
ws.onmessage = e => {
	const m = JSON.parse(e.data);
	if (m.id && pending.has(m.id)) {
		pending.get(m.id)(m);
		pending.delete(m.id);
	}
};
const send = (method, params = {}) => new Promise(r => {
	pending.set(++seq, r);
	ws.send(JSON.stringify({ id: seq, method, params }));
});
const ev = async expr => {
	const r = await send('Runtime.evaluate', { expression: expr, awaitPromise: true, returnByValue: true });
	if (r.result.exceptionDetails)
		throw new Error(JSON.stringify(r.result.exceptionDetails).slice(0, 600));
	return r.result.result.value;
};
const sleep = ms => new Promise(r => setTimeout(r, ms));
const shot = async file => {
	const s = await send('Page.captureScreenshot', { format: 'png' });
	writeFileSync(file, Buffer.from(s.result.data, 'base64'));
	console.log('wrote', file);
};
const PANEL = `(await import('./panels/profiler/profiler.js')).HeapProfilerPanel.HeapProfilerPanel.instance()`;

await send('Emulation.setDeviceMetricsOverride', { width: 1400, height: 820, deviceScaleFactor: 1, mobile: false });
await sleep(4000);   // the frontend loads its modules
await ev(`(async () => {
	const C = await import('./core/common/common.js');
	C.Settings.Settings.instance().createSetting('screencast-enabled', true).set(false);
	const UI = await import('./ui/legacy/legacy.js');
	await UI.ViewManager.ViewManager.instance().showView('heap-profiler');
})()`);
const data = readFileSync(snap, 'utf8');
await ev('window.__snap = []; 0');
for (let o = 0; o < data.length; o += 1 << 20)
	await ev('window.__snap.push(' + JSON.stringify(data.slice(o, o + (1 << 20))) + '); 0');
await ev(`(async () => {
	const blob = new Blob(window.__snap, { type: 'application/json' });
	delete window.__snap;
	await ${PANEL}.loadFromFile(new File([blob], ${JSON.stringify(snap.replace(/.*\//, ''))}));
})()`);
// the snapshot is parsed in a worker: wait for its proxy, then show it
let ready = false;
for (let i = 0; i < 150 && !ready; i++) {
	await sleep(2000);
	ready = await ev(`(async () => {
		const panel = ${PANEL};
		const p = panel.profileTypes[0].getProfiles()[0];
		if (!p || !p.snapshotProxy)
			return false;
		panel.showProfile(p);
		return true;
	})()`);
}
if (!ready) {
	console.error('the snapshot did not load in 300 s');
	process.exit(1);
}
await sleep(5000);
const rows = await ev(`(async () => {
	const v = ${PANEL}.visibleView;
	const top = v.dataGrid.rootNode().children;
	const line = n => n.element().innerText.replace(/\\s+/g, ' ').trim();
	return [document.title].concat(top.slice(0, 10).map(line)).join('\\n');
})()`);
console.log(rows);
await shot(`${out}-summary.png`);
const sel = await ev(`(async () => {
	const top = ${PANEL}.visibleView.dataGrid.rootNode().children[0];
	top.expand();
	await new Promise(r => setTimeout(r, 3000));
	const c = top.children[1] || top.children[0];
	c.revealAndSelect();
	await new Promise(r => setTimeout(r, 3000));
	return c.element().innerText.replace(/\\s+/g, ' ').trim();
})()`);
console.log('selected:', sel);
await shot(`${out}-retainers.png`);
ws.close();
process.exit(0);
