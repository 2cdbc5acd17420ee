"""What the stores keep: plain records and the pure changes of them (nothing here imports the engine)."""
