"""The gateway: `lle serve`, an OpenAI-compatible server that records any agent's episodes (see README.md)."""
