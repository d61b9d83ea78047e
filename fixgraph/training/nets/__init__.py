"""The torch side of each trainer (its LightningModule, collator and loss), imported only inside the
trainer's `train()`: registering and checking trainer configs, which every command does, then imports
neither torch nor lightning."""
