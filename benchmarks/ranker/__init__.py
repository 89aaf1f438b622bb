"""The evidence ranker and the layer router: ranked positions, variants, and their trainers."""
