"""The mail kind's search filters: sender, recipient, folder (facets written by the
mail kind's ``facets``)."""

from rag_sources.filters import FacetFilter

NAME_HINT = "(give a name or an e-mail address)"

SENDERS = FacetFilter(
    name="senders",
    option="--from",
    facets=("from",),
    help="Only mail from this name or address (repeatable).",
    description="Only messages from these people (name or e-mail address).",
    unknown="no indexed message is from",
    singular="sender",
    hint=NAME_HINT,
    aliases=("sender", "from"),
)
RECIPIENTS = FacetFilter(
    name="recipients",
    option="--to",
    facets=("to",),
    help="Only mail to (or cc) this name or address (repeatable).",
    description="Only messages to (or cc) these people (name or address).",
    unknown="no indexed message is to",
    singular="recipient",
    hint=NAME_HINT,
    aliases=("to", "recipient"),
)
# A folder matches its own messages and those of every folder inside it
# (`folder_in:` names each parent of a message's folder).
FOLDERS = FacetFilter(
    name="folders",
    option="--folder",
    facets=("folder", "folder_in"),
    help="Only mail in this folder or the folders inside it (repeatable).",
    description="Only messages in these mail folders (and folders inside them).",
    unknown="no indexed mail folder is",
    singular="folder",
    fold="folder",
    indexed="folders",
    aliases=("folder",),
)
