"""Mutations, one module per area (Saleor layout). Each returns ``errors: [SearchError!]!``."""
