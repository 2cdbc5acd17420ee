"""Recorded provider wire fixtures and the small HTTP server that replays them."""
