import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** A relative import of a top-level folder (`../test/x`, `../../harness/y`). */
const topLevel = (folders) => `^(\\.{1,2}/)+(${folders.join('|')})(/|$)`;
const TEST_IMPORT = {
  regex: topLevel(['test']),
  message: 'Tools never import from test/: move what they share into harness/ (DEVELOPERS.md).',
};
const TOOLS_IMPORT = {
  regex: topLevel(['harness', 'test', 'sim', 'stack', 'bench', 'chaos', 'dst']),
  message: 'What Kong runs imports only plugins/, pluginserver/ and src/ (DEVELOPERS.md).',
};

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'lib/',
      'node_modules/',
      'coverage/',
      'bench/results/',
      'test-output/',
      '.stryker-tmp/',
      'reports/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
      eqeqeq: ['error', 'always'],
      'no-console': 'off',
    },
  },
  {
    // The tools (local gateway, benchmark, fault run, deterministic simulation, simulator) and the
    // harness they share never reach into test/: what they use of the Kong side and of Redis lives in harness/.
    files: [
      'stack/**/*.ts',
      'bench/**/*.ts',
      'chaos/**/*.ts',
      'dst/**/*.ts',
      'sim/**/*.ts',
      'harness/**/*.ts',
    ],
    rules: { 'no-restricted-imports': ['error', { patterns: [TEST_IMPORT] }] },
  },
  {
    // What Kong runs (the npm package, the image: tsconfig.runtime.json) imports none of the rest.
    files: ['plugins/**/*.ts', 'pluginserver/**/*.ts', 'src/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [TOOLS_IMPORT] }] },
  },
  {
    // Tests read replies as loosely typed JSON.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
