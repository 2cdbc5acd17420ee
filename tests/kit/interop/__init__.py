"""Interop with the published Genkit clients: the agents (app.py) and the client scripts they are driven by."""
