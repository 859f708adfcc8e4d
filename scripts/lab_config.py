"""JupyterLab's configuration for `make lab` (passed with --config): notebook checkpoints go under
``.lab_checkpoints/`` at the repository root, mirroring each notebook's folder, never beside the notebook, so
opening an executed notebook in ``results/`` writes nothing into the results folder (docs/DECISIONS.md D462)."""
import os

from jupyter_core.utils import ensure_dir_exists
from jupyter_server.services.contents.filecheckpoints import AsyncFileCheckpoints

#: Where the checkpoints go, relative to the server's root (the repository; .gitignore lists it).
CHECKPOINT_ROOT = ".lab_checkpoints"


class CheckpointsOutside(AsyncFileCheckpoints):
    """Jupyter's file checkpoints, kept in one tree outside the notebooks' folders."""

    def checkpoint_path(self, checkpoint_id: str, path: str) -> str:
        parent, name = ("/" + path.strip("/")).rsplit("/", 1)
        basename, ext = os.path.splitext(name)
        cp_dir = os.path.join(self.root_dir, CHECKPOINT_ROOT, parent.strip("/"))
        with self.perm_to_403():
            ensure_dir_exists(cp_dir)
        return os.path.join(cp_dir, f"{basename}-{checkpoint_id}{ext}")


if "get_config" in globals():  # read by Jupyter as a configuration file
    c = get_config()  # noqa: F821 -- defined by Jupyter's config loader
    c.ContentsManager.checkpoints_class = CheckpointsOutside
