"""What a book run is asked to do: a profile (``profiles/<name>.yml``, loaded and checked by
``profile.py``) and the chapters' parameters (``parameters.py``: what each chapter's parameters
cell declares, and the checks of a profile and of ``-p`` overrides against it).

One meaning per name, everywhere in the book: ``profile`` is a profile's name (the string a
chapter's parameters cell holds, ``"course"``) and ``settings`` the ``Profile`` loaded from it
(``settings = load_profile(profile)``)."""

from .parameters import from_parameters
from .profile import PROFILES, Profile, load_profile, parameters_for, profile_path

__all__ = ["PROFILES", "Profile", "from_parameters", "load_profile", "parameters_for", "profile_path"]
