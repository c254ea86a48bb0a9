// Bundle the whiteboard page: node page/build.mjs NODE_MODULES OUT.
// Everything the page loads ends up in OUT; nothing is fetched at run time.
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const [modules, out] = process.argv.slice(2).map((p) => p && resolve(p));
if (!modules || !out) {
  console.error("usage: node page/build.mjs NODE_MODULES OUT");
  process.exit(2);
}
const { build } = createRequire(join(modules, "_"))("esbuild");
const here = dirname(fileURLToPath(import.meta.url));
const tmp = `${out}.tmp${process.pid}`;
rmSync(tmp, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });
await build({
  entryPoints: [join(here, "main.jsx")],
  bundle: true,
  splitting: true,
  format: "esm",
  minify: true,
  outdir: tmp,
  nodePaths: [modules],
  conditions: ["production"],
  define: { "process.env.NODE_ENV": '"production"', "import.meta.env.DEV": "false", "import.meta.env.PROD": "true" },
  jsx: "automatic",
  loader: { ".woff2": "file", ".png": "file", ".svg": "file" },
  chunkNames: "chunks/[name]-[hash]",
  assetNames: "files/[name]-[hash]",
  logLevel: "warning",
});
cpSync(join(modules, "@excalidraw/excalidraw/dist/prod/fonts"), join(tmp, "fonts"), { recursive: true });
cpSync(join(here, "index.html"), join(tmp, "index.html"));
cpSync(join(here, "asset-path.js"), join(tmp, "asset-path.js"));
rmSync(out, { recursive: true, force: true });
cpSync(tmp, out, { recursive: true });
rmSync(tmp, { recursive: true, force: true });
