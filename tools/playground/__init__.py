"""The docs site's playground runtime: Pyodide from the npm registry and the wheel built from this repository."""
