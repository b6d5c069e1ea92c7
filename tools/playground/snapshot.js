// Run by tools/playground/build.py as `node -e <this file> -- NAME PYODIDE_DIR WHEEL OUT` (NAME is
// what Emscripten records as the program's path: passing the script as -e keeps the build
// machine's paths out of the snapshot). It starts Pyodide, unpacks the wheel, imports the
// page's module and writes Pyodide's memory snapshot: the page then starts from it instead
// of initialising CPython and compiling the spec's modules (most of a first visit's CPU).
const fs = require('fs');
const path = require('path');
const [, pyodideDir, wheelPath, out] = process.argv.slice(1); // argv[1] is NAME
(async () => {
  const { loadPyodide } = require(path.join(pyodideDir, 'pyodide.js'));
  const pyodide = await loadPyodide({ indexURL: pyodideDir + '/', _makeSnapshot: true });
  const wheel = fs.readFileSync(wheelPath);
  pyodide.unpackArchive(new Uint8Array(wheel.buffer, wheel.byteOffset, wheel.length), 'wheel');
  pyodide.pyimport('auxspec.teach.playground');
  fs.writeFileSync(out, pyodide.makeMemorySnapshot());
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
