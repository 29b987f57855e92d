"""The small English/French lexicon behind the course tasks (written for this project).

Every entry is a plain record so that generators, tests and readers can check a label or a
translation by looking the words up. Fields group the words: the translation task and the
matched NLI split use the ``animals`` and ``home`` nouns with the ``everyday`` verbs; the
mismatched NLI split uses the ``work`` nouns and verbs, which never occur in its training split.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str  # "m" or "f" (French)
    field: str
    hypernym: str | None = None  # English singular of the parent noun, if any


@dataclass(frozen=True)
class Adjective:
    en: str
    fr: tuple[str, str, str, str]  # m.sg, f.sg, m.pl, f.pl
    before: bool  # French places it before the noun (petit, grand, ...)


@dataclass(frozen=True)
class Verb:
    en: str  # 3rd person singular: "watches"
    en_base: str  # "watch"
    fr: str  # 3sg: "regarde"
    fr_pl: str  # 3pl: "regardent"
    transitive: bool
    field: str
    hypernym: str | None = None  # en_base of a more general verb


def _nouns(field: str, rows: str) -> list[Noun]:
    out = []
    for line in rows.strip().splitlines():
        en, en_pl, fr, fr_pl, gender, *parent = line.split()
        out.append(Noun(en, en_pl, fr, fr_pl, gender, field, parent[0] if parent else None))
    return out


NOUNS: list[Noun] = (
    _nouns(
        "animals",
        """
        animal animals animal animaux m
        dog dogs chien chiens m animal
        cat cats chat chats m animal
        bird birds oiseau oiseaux m animal
        horse horses cheval chevaux m animal
        mouse mice souris souris f animal
        cow cows vache vaches f animal
        puppy puppies chiot chiots m dog
        poodle poodles caniche caniches m dog
        kitten kittens chaton chatons m cat
        parrot parrots perroquet perroquets m bird
        owl owls chouette chouettes f bird
        pony ponies poney poneys m horse
    """,
    )
    + _nouns(
        "home",
        """
        person people personne personnes f
        child children enfant enfants m person
        woman women femme femmes f person
        man men homme hommes m person
        girl girls fille filles f child
        boy boys garçon garçons m child
        neighbour neighbours voisin voisins m person
        friend friends ami amis m person
        baby babies bébé bébés m child
        grandmother grandmothers grand-mère grands-mères f woman
    """,
    )
    + _nouns(
        "work",
        """
        worker workers travailleur travailleurs m
        doctor doctors médecin médecins m worker
        surgeon surgeons chirurgien chirurgiens m doctor
        dentist dentists dentiste dentistes m doctor
        teacher teachers professeur professeurs m worker
        pilot pilots pilote pilotes m worker
        vehicle vehicles véhicule véhicules m
        truck trucks camion camions m vehicle
        bus buses bus bus m vehicle
        plane planes avion avions m vehicle
        jet jets jet jets m plane
        tractor tractors tracteur tracteurs m truck
    """,
    )
)

PLACES: list[Noun] = _nouns(
    "place",
    """
    garden gardens jardin jardins m
    house houses maison maisons f
    street streets rue rues f
    park parks parc parcs m
    kitchen kitchens cuisine cuisines f
    tree trees arbre arbres m
    school schools école écoles f
""",
)


def _adjectives(rows: str) -> list[Adjective]:
    out = []
    for line in rows.strip().splitlines():
        en, ms, fs, mp, fp, pos = line.split()
        out.append(Adjective(en, (ms, fs, mp, fp), pos == "before"))
    return out


ADJECTIVES: list[Adjective] = _adjectives("""
    small petit petite petits petites before
    big grand grande grands grandes before
    young jeune jeune jeunes jeunes before
    pretty joli jolie jolis jolies before
    black noir noire noirs noires after
    white blanc blanche blancs blanches after
    happy content contente contents contentes after
    tired fatigué fatiguée fatigués fatiguées after
    sick malade malade malades malades after
    brown brun brune bruns brunes after
    clever intelligent intelligente intelligents intelligentes after
    calm calme calme calmes calmes after
""")


def _verbs(field: str, transitive: bool, rows: str) -> list[Verb]:
    out = []
    for line in rows.strip().splitlines():
        en, base, fr, fr_pl, *parent = line.split()
        out.append(Verb(en, base, fr, fr_pl, transitive, field, parent[0] if parent else None))
    return out


VERBS: list[Verb] = (
    _verbs(
        "everyday",
        True,
        """
        sees see voit voient
        watches watch regarde regardent see
        follows follow suit suivent
        chases chase chasse chassent follow
        likes like aime aiment
        loves love adore adorent like
        finds find trouve trouvent
        bites bite mord mordent
        feeds feed nourrit nourrissent
        calls call appelle appellent
        hears hear entend entendent
    """,
    )
    + _verbs(
        "everyday",
        False,
        """
        sleeps sleep dort dorment
        runs run court courent
        sings sing chante chantent
        plays play joue jouent
        eats eat mange mangent
        jumps jump saute sautent
    """,
    )
    + _verbs(
        "work",
        True,
        """
        helps help aide aident
        examines examine examine examinent
        inspects inspect inspecte inspectent examine
        drives drive conduit conduisent
        repairs repair répare réparent
        paints paint peint peignent
        visits visit visite visitent
    """,
    )
)


def field_nouns(*fields: str) -> list[Noun]:
    return [n for n in NOUNS if n.field in fields]


def field_verbs(*fields: str, transitive: bool | None = None) -> list[Verb]:
    return [v for v in VERBS if v.field in fields and (transitive is None or v.transitive == transitive)]


def noun(en: str) -> Noun:
    for n in NOUNS + PLACES:
        if en in (n.en, n.en_pl):
            return n
    raise KeyError(f"{en!r} is not in the lexicon")


def is_hyponym(child: str, parent: str) -> bool:
    """True when ``child`` is ``parent`` or below it in the noun hierarchy (English singulars)."""
    current: str | None = child
    while current is not None:
        if current == parent:
            return True
        current = noun(current).hypernym
    return False


def verb(en: str) -> Verb:
    for v in VERBS:
        if en in (v.en, v.en_base):
            return v
    raise KeyError(f"{en!r} is not in the lexicon")
