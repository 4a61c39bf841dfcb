"""Code-repair worlds: `code/humaneval-v1` (HumanEval with injected bugs) and `code/quirks-v1`
(generated multi-file projects, each with a convention its tests enforce). See README.md."""
