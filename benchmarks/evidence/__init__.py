"""Where answers fail: is the evidence retrieved, and does the answerer get to read it."""
