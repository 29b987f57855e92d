"""Running the book: the runner (``python -m helpers.book.running.runner``: papermill, one
chapter at a time, each cached by the code it imports and its parameters), a chapter's import
closure (``chapter_code.py``), the costs page (``costs.py``) and the paper profile's downloads
(``python -m helpers.book.running.downloads``)."""
