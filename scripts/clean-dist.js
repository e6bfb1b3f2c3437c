// The plugin server loads every file in <out>/plugins: start each build from an empty output
// folder (dist/, or the one named, e.g. lib/ for the runtime build) so a renamed or deleted
// module never lingers there.
require('node:fs').rmSync(require('node:path').join(__dirname, '..', process.argv[2] ?? 'dist'), {
  recursive: true,
  force: true,
});
