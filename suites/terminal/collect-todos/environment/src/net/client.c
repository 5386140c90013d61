stone willow

amber willow meadow marble beacon marble
glacier
drift quiet lantern harbor willow
summit cedar thistle
granite falcon orchard amber meadow
glacier compass beacon ember
summit orchard whistle
signal falcon copper

drift meadow copper
copper marble
signal falcon willow whistle
// TODO(chen): lantern tide marble copper copper  
compass lantern signal cedar


hollow
copper
// TODO: no owner here, not collected
willow falcon
cedar glacier granite copper
willow falcon compass hollow
harbor river marble meadow
amber summit

// TODO: no owner here, not collected
river falcon glacier signal
// TODO: no owner here, not collected
ferry
compass
beacon ember hollow stone hollow
// TODO: no owner here, not collected
// TODO: no owner here, not collected
stone cedar ferry ferry
tide drift amber hollow
quiet thistle whistle
summit harbor compass marble glacier river
falcon
signal tide ember tide orchard

thistle thistle falcon quiet thistle
orchard summit

willow stone
// TODO: no owner here, not collected

thistle drift
glacier granite thistle beacon lantern
marble
return y;  // TODO(chen): marble granite  
cedar quiet thistle copper
