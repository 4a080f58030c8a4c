"""Local models shared by judges, the server and training: loading, generation, reward-model networks."""
