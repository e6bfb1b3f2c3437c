// The plugin server loads every file in dist/plugins: start each build from an empty dist/
// so a renamed or deleted module never lingers there.
require('node:fs').rmSync(require('node:path').join(__dirname, '..', 'dist'), {
  recursive: true,
  force: true,
});
