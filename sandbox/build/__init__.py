"""Zone **build** — turning a candidate's native sources into loadable modules: what its `load_inline` calls
are (read statically), kevolve's build recipe, the build service that compiles ahead of an evaluation, and the
runner's own build path. Trusted code, untrusted inputs: every compiler it starts runs confined (isolate/)."""
