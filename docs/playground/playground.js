// The playground page (docs/playground.md). All semantics come from Python:
// Pyodide runs auxspec.teach.playground from the wheel built from this
// repository (tools/playground/build.py vendors both into the site). This
// script only holds the session (sizes, profile, command lines), sends it
// whole to Python after each change, and shows the sections Python returns.
(function () {
  'use strict';
  const base = new URL('.', document.currentScript.src);
  const root = document.getElementById('playground-app');
  const $ = (id) => document.getElementById(id);
  const DEFAULT = { profile: 'strict', max_bytes: 6, object_nbytes: 2, commands: [] };
  let api = null;
  let session = fromHash(location.hash) || { ...DEFAULT };
  let current = null; // the step shown (0-based); null: the last one

  function fromHash(hash) {
    if (hash.length < 2) return null;
    const params = new URLSearchParams(hash.slice(1));
    if (!params.has('profile') && !params.has('op')) return null;
    const size = (name, fallback) => {
      const n = parseInt(params.get(name), 10);
      return Number.isNaN(n) ? fallback : n;
    };
    return {
      profile: params.get('profile') || DEFAULT.profile,
      max_bytes: size('max_bytes', DEFAULT.max_bytes),
      object_nbytes: size('object_nbytes', DEFAULT.object_nbytes),
      commands: params.getAll('op'),
    };
  }

  function toHash(s) {
    const params = new URLSearchParams();
    params.set('profile', s.profile);
    params.set('max_bytes', String(s.max_bytes));
    params.set('object_nbytes', String(s.object_nbytes));
    s.commands.forEach((c) => params.append('op', c));
    return '#' + params.toString();
  }

  function say(text, kind) {
    const box = $('pg-message');
    box.textContent = text;
    box.className = kind || '';
  }

  function view(s) {
    return JSON.parse(api.view(JSON.stringify(s)));
  }

  function exported(s) {
    return api.export(JSON.stringify(s));
  }

  // Replace the session by `next` if Python takes all of it; else keep what it took and say why.
  function apply(next) {
    const seen = view(next);
    if (seen.refused) {
      next = { ...next, commands: next.commands.slice(0, seen.refused.index) };
      say('refused: ' + seen.refused.command + ': ' + seen.refused.why, 'refused');
    } else {
      say('', '');
    }
    session = next;
    current = null;
    render(seen.refused ? view(session) : seen);
  }

  function render(shown) {
    $('pg-profile').value = session.profile;
    $('pg-object-nbytes').value = String(session.object_nbytes);
    if (shown.capacity !== null) $('pg-capacity').value = String(shown.capacity);
    $('pg-header').textContent = shown.header;
    $('pg-legend').innerHTML = shown.legend;
    const steps = $('pg-steps');
    steps.innerHTML = shown.steps.map((s) => s.html).join('');
    const sections = Array.from(steps.querySelectorAll('section.step'));
    sections.forEach((section, i) => {
      section.dataset.command = shown.steps[i].command;
      section.dataset.state = JSON.stringify(shown.steps[i].state);
      section.dataset.outcomeJson = JSON.stringify(shown.steps[i].outcome);
    });
    const list = $('pg-history');
    list.innerHTML = '';
    shown.steps.forEach((s, i) => {
      const item = document.createElement('li');
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'pg-step' + (s.evicted.length ? ' evicts' : '') + (s.outcome.error ? ' fails' : '');
      button.textContent = s.command + '  →  ' + s.outcome_text;
      button.addEventListener('click', () => show(i));
      item.appendChild(button);
      list.appendChild(item);
    });
    root.dataset.steps = String(shown.steps.length);
    const link = toHash(session);
    history.replaceState(null, '', link);
    $('pg-share').href = link;
    $('pg-vector').textContent = exported(session);
    $('pg-download').disabled = session.profile === 'remote'; // no vector holds a choice of outcomes
    $('pg-undo').disabled = session.commands.length === 0;
    show(current === null ? shown.steps.length - 1 : current);
  }

  function show(index) {
    const sections = Array.from($('pg-steps').querySelectorAll('section.step'));
    current = sections.length ? Math.max(0, Math.min(sections.length - 1, index)) : null;
    sections.forEach((s, i) => { s.hidden = i !== current; });
    Array.from($('pg-history').querySelectorAll('button')).forEach((b, i) => {
      b.classList.toggle('current', i === current);
    });
    root.dataset.current = String(current === null ? 0 : current + 1);
    $('pg-empty').hidden = sections.length > 0;
  }

  function words(id) {
    return $(id).value.split(/[\s,]+/).filter((w) => w.length > 0);
  }

  function run(command) {
    command = command.trim();
    if (!command) return;
    apply({ ...session, commands: [...session.commands, command] });
  }

  // What each op button types: the same command lines as `auxspec play`.
  const BUTTONS = {
    'pg-put': () => ['put', ...words('pg-keys'), ...flag('--retain', 'pg-retain'), ...flag('--release', 'pg-release'), ...inside()],
    'pg-get': () => ['get', ...words('pg-keys'), ...inside()],
    'pg-read': () => ['read', ...words('pg-keys'), ...inside()],
    'pg-retain-op': () => ['retain', ...words('pg-keys')],
    'pg-release-op': () => ['release', ...words('pg-keys')],
    'pg-close': () => ['close'],
  };
  // Section 12: the key list or batch is a generator that first calls the store again.
  function inside() {
    const call = $('pg-inside').value;
    return call ? ['--from-inside', call] : [];
  }
  function flag(name, id) {
    const given = words(id);
    return given.length ? [name, ...given] : [];
  }

  // A handler's failure (a bug, or Python refusing a request) is shown, not lost in the console.
  function guard(handler) {
    return (event) => {
      try {
        handler(event);
      } catch (error) {
        say('error: ' + error.message, 'refused');
      }
    };
  }

  function wire() {
    $('pg-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const input = $('pg-command');
      const typed = input.value;
      input.value = '';
      guard(() => run(typed))();
    });
    Object.entries(BUTTONS).forEach(([id, build]) => {
      $(id).addEventListener('click', guard(() => run(build().join(' '))));
    });
    $('pg-undo').addEventListener('click', guard(() => apply({ ...session, commands: session.commands.slice(0, -1) })));
    $('pg-clear').addEventListener('click', guard(() => apply({ ...session, commands: [] })));
    $('pg-profile').addEventListener('change', guard(() => {
      const before = session.commands.length;
      const wanted = $('pg-profile').value;
      const replayed = view({ ...session, profile: wanted });
      if (replayed.refused) {
        $('pg-profile').value = session.profile;
        say('refused: ' + wanted + ' leaves step ' + (replayed.refused.index + 1) + ' undefined: ' + replayed.refused.why, 'refused');
        return;
      }
      apply({ ...session, profile: wanted });
      say(wanted + ': the ' + before + ' ops replayed', '');
    }));
    $('pg-sizes').addEventListener('click', guard(() => {
      const capacity = parseInt($('pg-capacity').value, 10);
      const size = parseInt($('pg-object-nbytes').value, 10);
      if (!(capacity >= 1 && size >= 1)) {
        say('capacity and object size are whole numbers of at least 1', 'refused');
        return;
      }
      apply({ ...session, max_bytes: capacity * size, object_nbytes: size });
    }));
    // Remote profile: a step's allowed outcomes are buttons; one replays the session with the engine's pick.
    $('pg-steps').addEventListener('click', guard((e) => {
      const button = e.target.closest('button.pg-branch');
      if (!button) return;
      const index = Number(button.closest('section.step').dataset.step) - 1;
      const commands = [...session.commands];
      commands[index] = commands[index].replace(/\s+--outcome\s+\S+$/, '') + ' --outcome ' + button.dataset.outcome;
      apply({ ...session, commands });
      show(index);
    }));
    $('pg-download').addEventListener('click', () => {
      const blob = new Blob([$('pg-vector').textContent], { type: 'application/x-ndjson' });
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob);
      a.download = 'playground.jsonl';
      a.click();
      URL.revokeObjectURL(a.href);
    });
    $('pg-copy').addEventListener('click', () => {
      const url = new URL($('pg-share').getAttribute('href'), location.href).href;
      if (navigator.clipboard) navigator.clipboard.writeText(url).then(() => say('link copied', ''), () => say(url, ''));
      else say(url, '');
    });
    window.addEventListener('hashchange', guard(() => {
      const next = fromHash(location.hash);
      if (next && toHash(next) !== toHash(session)) apply(next);
    }));
    document.addEventListener('keydown', (e) => {
      if (e.target && (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT')) return;
      if (e.key === 'ArrowLeft' && current !== null) show(current - 1);
      else if (e.key === 'ArrowRight' && current !== null) show(current + 1);
    });
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const tag = document.createElement('script');
      tag.src = src;
      tag.onload = resolve;
      tag.onerror = () => reject(new Error('cannot load ' + src));
      document.head.appendChild(tag);
    });
  }

  async function boot() {
    root.dataset.state = 'loading';
    say('loading Python and the spec…', '');
    // Pyodide's script and the manifest at once (the page's preload hints have started the big files).
    const script = loadScript(new URL('pyodide/pyodide.js', base).href);
    const answer = await fetch(new URL('runtime.json', base));
    if (!answer.ok) throw new Error('this build of the site has no playground runtime (tools/playground/build.py vendors it)');
    const runtime = await answer.json();
    const bytes = (name) => fetch(new URL(name, base)).then((r) => {
      if (!r.ok) throw new Error('cannot fetch ' + name);
      return r.arrayBuffer();
    });
    // The snapshot is served gzipped (25 MB to 6 MB) whatever the server does; the browser inflates it.
    const gunzipped = (name) => fetch(new URL(name, base)).then((r) => {
      if (!r.ok) throw new Error('cannot fetch ' + name);
      return new Response(r.body.pipeThrough(new DecompressionStream('gzip'))).arrayBuffer();
    });
    const wheel = bytes(runtime.wheel);
    await script;
    // Marks: milliseconds from the start of navigation (tools/playground/measure_load.py reads them).
    performance.mark('pg-pyodide-js');
    const options = { indexURL: new URL('pyodide/', base).href };
    // The snapshot holds Python started with the spec imported (tools/playground/snapshot.js), so
    // the first view needs no file of the wheel: it is unpacked after it (for a module imported
    // later). Without a snapshot Python imports the spec from the wheel first.
    if (runtime.snapshot) options._loadSnapshot = gunzipped(runtime.snapshot);
    const pyodide = await globalThis.loadPyodide(options);
    performance.mark('pg-python');
    const unpack = async () => {
      pyodide.unpackArchive(await wheel, 'wheel');
      performance.mark('pg-wheel');
    };
    if (!runtime.snapshot) await unpack();
    api = pyodide.pyimport('auxspec.teach.playground');
    performance.mark('pg-import');
    wire();
    try {
      apply(session);
    } catch (error) {
      // A link the page cannot read (an unknown profile, too many ops) opens an empty session instead.
      apply({ ...DEFAULT });
      say('this link holds no session the playground can replay: ' + error.message.trim().split('\n').pop(), 'refused');
    }
    performance.mark('pg-ready');
    root.dataset.state = 'ready';
    if (runtime.snapshot) setTimeout(() => unpack().catch((error) => say('the wheel: ' + error.message, 'refused')), 0);
  }

  boot().catch((error) => {
    root.dataset.state = 'failed';
    say('the playground could not start: ' + error.message, 'refused');
  });
})();
