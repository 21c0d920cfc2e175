"""Python helpers of the search pipelines (docs/search.md).

Modules:
  canon  -- ``state_hashes(request)``: canonical AST hashes of kernel sources
            (the state key of the Monte-Carlo graph search: two move orders
            that reach the same kernel share one node).
"""
