import sys, os, tempfile, json
from cloudinit import user_data, helpers, handlers, util
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit.settings import PER_ALWAYS
d = tempfile.mkdtemp()
paths = helpers.Paths({"cloud_dir": d, "run_dir": d})
os.makedirs(os.path.join(d, "instance"), exist_ok=True)
paths.get_ipath = lambda name=None: os.path.join(d, "instance", name or "")
msg = user_data.UserDataProcessor(paths).process(open(sys.argv[1], "rb").read())
h = CloudConfigPartHandler(paths)
h.handle_part(None, handlers.CONTENT_START, None, None, PER_ALWAYS, {})
kinds = []
for part in msg.walk():
    if part.get_content_maintype() == "multipart":
        continue
    ct = part.get_content_type()
    kinds.append(ct)
    if ct == "text/cloud-config":
        h.handle_part(None, ct, part.get_filename(), part.get_payload(decode=True).decode(), PER_ALWAYS, dict(part.items()))
h.handle_part(None, handlers.CONTENT_END, None, None, PER_ALWAYS, {})
cfg = util.load_yaml(open(os.path.join(d, "instance", "cloud_config")).read())
print(json.dumps({"parts": kinds, "config": cfg}, sort_keys=True))
