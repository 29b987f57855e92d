"""``python -m helpers.book.course``: build (or reuse) a profile's models (see ``main``)."""

from .building import main

main()
