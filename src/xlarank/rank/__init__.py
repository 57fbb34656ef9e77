"""Ranking configs: labels, booster adapters, specs, training, saved models.

Modules, each importing only those listed above it:

    labels    relevance grades and log slowdowns from the ranking target, per graph
    booster_files  LightGBM and XGBoost model files checked before the library reads them
    hgb       scikit-learn's HistGradientBoostingRegressor as plain arrays
    boosters  one adapter per booster library (LightGBM, XGBoost, scikit-learn), their registry
    spec      RankerSpec, read from models/*.toml and checked against the adapters
    ranker    Ranker: one trained booster and its card; the card file and its format
    ensemble  Ensemble: rankers whose per-graph normalized scores are averaged
    model     Model, the interface both share, and load_model for either kind
    train     shared preparation (checks, sampling, labels), the card, local training
    search    xlarank tune: random search over a spec's parameters; tune_spec_file writes
              the chosen spec
    dask      training on a Dask cluster, with train's preparation and card
    train_specs  train_from_specs: spec files in, a saved model out, local or on Dask
    measured  the measured configs of one graph: the CSV, repeats merged, the ranked table
    ingraph   in-graph ranking: a graph-local booster from some measured configs
    tuner     the config tuner (ask/tell): which configs to measure next, on ingraph

`xlarank.distributed` holds only the Dask client, which `train_specs` asks for; nothing
under rank/ is imported by it.
"""
