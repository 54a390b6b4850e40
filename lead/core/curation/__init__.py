r"""Dataset curation, the pure core: raw rows in, a clean training pool, a test split and a report out.

Callers (:mod:`lead.curation`, via ``lead/io/sources.py``) read the files and write the results; nothing
here touches the file system. Every input row ends in exactly one place: the training pool, the test split,
the quarantine (with a reason from :data:`REASONS`), or — only when ``max_problems`` /
``max_train_problems`` ask for fewer — the count of problems sampled out. The steps, in order, each one
function from the records the previous step kept to a :class:`Step` (kept, quarantined, report entries),
which :func:`curate` runs in turn:

1. **Rows → records** (:func:`load_records`; per source :func:`records_from_rows`). Field mapping:
   problem = ``problem`` or ``question``; answer = ``answer`` when the row has that key, else the last
   ``\boxed{}`` of ``solution`` (:func:`lead.grading.extract_answer`, box rule); optional
   ``id``/``unique_id``, ``level`` (``3`` or ``"Level 3"``), ``difficulty``, ``correctness``, ``solution``,
   ``split`` (``test`` = held out). Ids are ``<source>-<id or row index>``. A malformed line, a row with no
   problem or no answer, or a repeated id is quarantined.
2. **Normalise answers** (:func:`normalize_answers`; per answer :func:`normalize_answer`): numbers to text
   (``27.0`` → ``27``), surrounding ``$``/``\(``/``\[`` and a whole ``\boxed{}`` unwrapped, whitespace
   collapsed, AIME-style leading zeros dropped (``025`` → ``25``), a trailing period dropped. Each rule is
   counted.
3. **Gradable gold** (:func:`keep_gradable`; :func:`lead.grading.gold_problems`): the grader's own
   extraction and parse of the gold, the same the reward makes: plain numbers at once, guarded answers
   refused, everything else parsed by math-verify in the grader's worker processes (``\frac{1}{`` does not
   parse). A gold refused there could never earn a reward, so the problem is quarantined.
4. **Prompt length** (:func:`limit_prompt_length`): problem + prompt suffix counted with the model's
   tokenizer (chat template included) when one can be loaded, else estimated as ``ceil(characters / 2.5)``
   (:func:`estimate_tokens`); longer than ``max_prompt_tokens`` is quarantined (TRL 1.16 no longer
   truncates prompts).
5. **Exact duplicates** (:func:`drop_exact_duplicates`): same normalised word sequence (:func:`words`:
   lower-cased NFKC text, LaTeX formatting commands and math delimiters dropped; numbers, operators and
   brackets kept). The first copy wins, test records before training records (so the train pool never
   repeats a test problem), then source order, then row order. A later copy with a different answer is
   quarantined as ``duplicate_conflict``.
6. **Near duplicates** (:func:`drop_near_duplicates`): Jaccard similarity of word 5-gram sets ≥
   ``near_duplicate_jaccard`` (0.9), found with MinHash (64 multiply-shift hashes) and LSH (16 bands × 4
   rows), then verified exactly. Only pairs with the *same* answer are duplicates: the same template with
   other numbers is a different problem (the proxy task is made of such pairs).
7. **Decontamination** (:func:`drop_contaminated`; training records only) against every benchmark given
   (:func:`decontaminate`). The *coverage* of a benchmark problem by a training problem is the share of its
   words that lie inside a word ``decontam_ngram``-gram (8) the two share (the Tülu 3 measure). A training
   problem is contaminated when coverage reaches ``decontam_coverage_any_answer`` (80 %: near-verbatim text
   — the same problem with its answer asked in another form, or the same set-up or figure with another
   question, or a template sibling with other numbers), or ``decontam_coverage`` (50 %: a reformatted or
   lightly reworded copy) with an equal gold answer. Paraphrases that share no n-gram are not caught. Below
   80 % with a different answer a pair is kept and counted: on the shipped data those are template
   siblings or shared boilerplate ("Express your answer as a common fraction.", Asymptote grids) on short
   benchmark problems. A benchmark problem shorter than n words must appear whole.
8. **Mixing** (:func:`mix`; training records only): ``max_problems`` caps a source; ``max_train_problems``
   shares a total out by source ``weight`` (sources with fewer problems than their share give the rest to
   the others); the kept subset is a seeded sample in original order.

Everything is deterministic for the same rows and settings.

One module per concern (``from lead.core import curation`` and ``from lead.core.curation import X`` reach every
public name through this package):

==================  ==================================================================================
:mod:`.records`     rows → records: :class:`Record`, :class:`Rejected`, :class:`SourceInput`, the
                    quarantine :data:`REASONS`, :func:`records_from_rows`
:mod:`.answers`     gold answers: :func:`normalize_answer`, :func:`same_answer`, :func:`estimate_tokens`
:mod:`.similarity`  problem text compared: :func:`words`, n-grams, MinHash/LSH :func:`near_duplicates`,
                    the :class:`ContaminationIndex` and :func:`decontaminate`
:mod:`.mixing`      how many problems each source keeps (:func:`quotas`) and which (:func:`sample_in_order`)
:mod:`.pipeline`    the steps 1-8 (one function each, records in, a :class:`Step` out), :func:`curate`,
                    :func:`summary`
==================  ==================================================================================

The core returns numbers and records; the report rendered for people (markdown) is
:mod:`lead.reports.curation`.
"""

from __future__ import annotations

from lead.core.curation.answers import CHARS_PER_TOKEN, estimate_tokens, normalize_answer, same_answer
from lead.core.curation.mixing import quotas, sample_in_order
from lead.core.curation.pipeline import (
    SAMPLED_OUT,
    Result,
    Settings,
    Step,
    curate,
    drop_contaminated,
    drop_exact_duplicates,
    drop_near_duplicates,
    keep_gradable,
    limit_prompt_length,
    load_records,
    mix,
    normalize_answers,
    removed_by_source,
    step_row,
    summary,
)
from lead.core.curation.records import REASONS, Malformed, Record, Rejected, SourceInput, records_from_rows
from lead.core.curation.similarity import (
    SHINGLE,
    ContaminationIndex,
    Hit,
    decontaminate,
    jaccard,
    minhash,
    near_duplicates,
    ngrams,
    words,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "REASONS",
    "SAMPLED_OUT",
    "SHINGLE",
    "ContaminationIndex",
    "Hit",
    "Malformed",
    "Record",
    "Rejected",
    "Result",
    "Settings",
    "SourceInput",
    "Step",
    "curate",
    "decontaminate",
    "drop_contaminated",
    "drop_exact_duplicates",
    "drop_near_duplicates",
    "estimate_tokens",
    "jaccard",
    "keep_gradable",
    "limit_prompt_length",
    "load_records",
    "minhash",
    "mix",
    "near_duplicates",
    "ngrams",
    "normalize_answer",
    "normalize_answers",
    "quotas",
    "records_from_rows",
    "removed_by_source",
    "same_answer",
    "sample_in_order",
    "step_row",
    "summary",
    "words",
]
