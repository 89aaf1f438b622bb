"""MoM document memories: Recall@10 of late fusion, their build, costs and answers."""
