"""Reads for pages, by what they read: items and listings, revisions (TOC, passages, quality), the catalogue
(facets, options, card extras) and closed material."""
