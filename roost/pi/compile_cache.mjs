// Preloaded into each pi that roost starts (`node --import <this file> <pi's cli.js>`, see
// roost/pi/locate.py): node's compile cache in a folder of this user's, never in the shared
// temp folder.
//
// pi 1.x turns the cache on itself (`module.enableCompileCache()`). Without
// NODE_COMPILE_CACHE that is os.tmpdir()/node-compile-cache, one folder for every user of
// the machine, made 0755 by whoever runs node there first. V8 trusts the code cache it
// loads, so a local user who makes that folder first chooses what every later pi of
// everyone else loads, or at least keeps it from being cached. Turned on here first, in
// `${XDG_CACHE_HOME:-~/.cache}/roost/node-compile-cache`, pi's own call finds it on and
// keeps it. Nothing goes into the environment, so the node programs the agent's tools run
// behave as they would without roost. The old line (0.73.1) gets the cache too on a node
// that has one (22.1 and later).
//
// Left as it is when the person chose (NODE_COMPILE_CACHE or NODE_DISABLE_COMPILE_CACHE),
// when this node has no compile cache (node 20), and when the folder cannot be made
// private (pi then does what it does without roost). Never throws: pi must start.
import fs from "node:fs";
import module from "node:module";
import os from "node:os";
import path from "node:path";

function cacheRoot() {
  const xdg = process.env.XDG_CACHE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), ".cache");
  return path.join(base, "roost");
}

// The folder when it is this user's alone (a real directory, theirs, no one else may
// write it), made so when it is absent; null otherwise.
function privateFolder(folder) {
  fs.mkdirSync(folder, { recursive: true, mode: 0o700 });
  const st = fs.lstatSync(folder);
  if (!st.isDirectory() || st.uid !== process.getuid()) return null;
  if ((st.mode & 0o077) !== 0) fs.chmodSync(folder, 0o700);
  return folder;
}

function enable() {
  if (typeof module.enableCompileCache !== "function") return;
  if (process.env.NODE_COMPILE_CACHE || process.env.NODE_DISABLE_COMPILE_CACHE) return;
  try {
    const root = privateFolder(cacheRoot());
    if (root !== null) module.enableCompileCache(path.join(root, "node-compile-cache"));
  } catch {
    // a home that cannot be written: pi runs as it would without roost
  }
}

enable();
