"""The HTTP API (FastAPI on uvicorn): the control plane's service face, a face of the client as
the CLI is (docs/api.md). It sits above the client facade in the house (.importlinter): every
route calls the same `Client` operations the CLI does, on a client whose audit actor is the
caller's token name."""
