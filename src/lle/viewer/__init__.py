"""`lle view`: a local, server-rendered web app over a workspace's runs, episodes and carriers."""
